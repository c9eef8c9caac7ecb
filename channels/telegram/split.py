"""Splitting formatted Telegram HTML into parts Telegram accepts: within the limit, tags balanced.

Telegram counts message length in UTF-16 code units (an emoji or other astral character counts
twice). Parts are measured *after* formatting, on the HTML itself, tags and entities included:
that bounds the parsed text too, and the plain-text fallback of a part is never longer than it.

Every part is well formed on its own: tags still open at a cut are closed at the end of the part
and re-opened at the start of the next one, so a code block split in two is two code blocks.
Cuts prefer a paragraph break, then a line break, then a space, and fall back to any point
between characters (never inside an entity, a surrogate pair, or just before a joining
character such as a zero-width joiner or a variation selector).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from enum import IntEnum

from bot.errors import SplitError

TELEGRAM_MESSAGE_LIMIT = 4096

_TOKEN = re.compile(r"<(/?)([a-z-]+)[^>]*>|&(?:#\d+|#x[0-9a-fA-F]+|[a-z]+);|.", re.DOTALL)
_JOINERS = {"\u200d", "\ufe0f", "\ufe0e", "\u20e3"}


def utf16_length(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


class _Kind(IntEnum):
    TEXT = 0
    OPEN = 1
    CLOSE = 2


class _Break(IntEnum):
    """How good a cut after this token is; higher is better."""

    ANY = 0
    SPACE = 1
    LINE = 2
    PARAGRAPH = 3


@dataclass(frozen=True, slots=True)
class _Token:
    kind: _Kind
    raw: str
    name: str  # the tag name for OPEN/CLOSE, the decoded character class for TEXT
    units: int
    joins: bool = False  # a joining character: no cut right before or after it


def _tokenize(formatted: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(formatted):
        raw, slash, name = match.group(0, 1, 2)
        if name is None:
            tokens.append(_text(raw))
        else:
            kind = _Kind.CLOSE if slash else _Kind.OPEN
            tokens.append(_Token(kind, raw, name, len(raw)))
    return tokens


@functools.lru_cache(maxsize=4096)
def _text(raw: str) -> _Token:
    """The token of one character or entity (tokens are immutable: one per distinct text)."""
    return _Token(_Kind.TEXT, raw, "", utf16_length(raw), _joins(raw))


def _closing(stack: tuple[_Token, ...]) -> str:
    return "".join(f"</{tag.name}>" for tag in reversed(stack))


def _closing_units(stack: tuple[_Token, ...]) -> int:
    return sum(len(tag.name) + 3 for tag in stack)


def _push(stack: tuple[_Token, ...], token: _Token) -> tuple[_Token, ...]:
    if token.kind is _Kind.OPEN:
        return (*stack, token)
    if token.kind is _Kind.CLOSE and stack:
        return stack[:-1]
    return stack


def _quality(tokens: list[_Token], end: int) -> _Break | None:
    """How good a cut before tokens[end] is; None where a cut must not go."""
    last = tokens[end - 1]
    if last.kind is _Kind.OPEN:
        return None  # the part would end on an empty entity
    if last.raw == "\n":
        previous = tokens[end - 2].raw if end >= 2 else ""
        return _Break.PARAGRAPH if previous == "\n" else _Break.LINE
    if last.raw == " ":
        return _Break.SPACE
    if last.joins or (end < len(tokens) and tokens[end].joins):
        return None
    return _Break.ANY


def _joins(raw: str) -> bool:
    if len(raw) != 1:
        return False
    return (
        raw in _JOINERS
        or unicodedata.category(raw) in ("Mn", "Mc", "Me")
        or (
            0x1F3FB <= ord(raw) <= 0x1F3FF  # skin tone modifiers
        )
    )


@dataclass(slots=True)
class _Cut:
    end: int
    stack: tuple[_Token, ...]
    used: int


def split_html(formatted: str, limit: int = TELEGRAM_MESSAGE_LIMIT) -> list[str]:
    """Split `formatted` into parts of at most `limit` UTF-16 units, each with balanced tags.

    Parts that would carry no visible text are dropped; nothing else is. Whitespace at a cut is
    dropped.
    """
    tokens = _tokenize(formatted)
    parts: list[str] = []
    start = 0
    stack: tuple[_Token, ...] = ()
    while start < len(tokens):
        cut = _next_cut(tokens, start, stack, limit)
        body = _trim_trailing_space(tokens[start : cut.end])
        part = "".join(tag.raw for tag in stack) + body + _closing(cut.stack)
        if _visible(tokens[start : cut.end]):
            parts.append(part)
        start, stack = cut.end, cut.stack
        while start < len(tokens) and tokens[start].raw in ("\n", " ") and not stack:
            start += 1  # no part starts with the whitespace of the cut it follows
    return parts


def _next_cut(tokens: list[_Token], start: int, stack: tuple[_Token, ...], limit: int) -> _Cut:
    # Runs once per token of the answer: the closing tags' length is kept as the stack changes,
    # and a candidate cut is a plain tuple (end, stack, used) until one is chosen.
    used = sum(tag.units for tag in stack)
    closing = _closing_units(stack)
    best: dict[_Break, tuple[int, tuple[_Token, ...], int]] = {}
    latest: tuple[int, tuple[_Token, ...], int] | None = None
    end = start
    while end < len(tokens):
        token = tokens[end]
        if token.kind is _Kind.TEXT:
            after, closing_after = stack, closing
        else:
            after = _push(stack, token)
            closing_after = _closing_units(after)
        if used + token.units + closing_after > limit:
            break
        used += token.units
        stack, closing = after, closing_after
        end += 1
        quality = _quality(tokens, end)
        if quality is not None:
            best[quality] = latest = (end, stack, used)
    if end == len(tokens):
        return _Cut(end, stack, used)
    # Prefer the best kind of break, unless it leaves the part less than half full.
    for quality in sorted(best, reverse=True):
        if best[quality][2] * 2 >= limit:
            return _Cut(*best[quality])
    if latest is not None:
        return _Cut(*latest)
    raise SplitError(
        f"cannot split at token {start}: the markup open there needs more than the limit of "
        f"{limit} UTF-16 units. Fix: raise the limit or bound tag lengths in the formatter."
    )


def _trim_trailing_space(tokens: list[_Token]) -> str:
    end = len(tokens)
    while end > 0 and tokens[end - 1].kind is _Kind.TEXT and tokens[end - 1].raw.isspace():
        end -= 1
    return "".join(t.raw for t in tokens[:end])


def _visible(tokens: list[_Token]) -> bool:
    return any(t.kind is _Kind.TEXT and not t.raw.isspace() for t in tokens)
