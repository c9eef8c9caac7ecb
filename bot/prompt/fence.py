"""Untrusted text made safe for the prompt: fence-tag neutralization, one-line names, bounds.

The host marks parts of a user message with a few XML-like tags (its "fences"). Text the host did
not write (message bodies, display names, surface names, the person's own words, recalled memory)
must never open or close one of those fences, so every occurrence of exactly those tag forms is
escaped: the `<` becomes `&lt;`. Nothing else changes, so the words stay readable, and the escape is
reversible (`restore`): an `&lt;` (or `&amp;lt;`, ...) that already precedes a tag form gains one
more `amp;`, so escaping never merges with text that merely looks escaped.
"""

from __future__ import annotations

import re
import unicodedata

# Every tag the host uses as a fence, anywhere in the request.
FENCE_TAGS = (
    "turn_context",
    "preceding_messages",
    "speaker",
    "skill",
    "recalled_memory",
    "conversation_summary",
    "attachment",
)

# A tag form: optional whitespace, an optional slash, optional whitespace, then a fence tag name
# not followed by another name character (so `<speakers>` or `<skill-x` are not fence tags).
# Invisible format characters count as whitespace here: a model reads `<\u200bspeaker>` as a tag.
_GAP = r"[\s\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]*"
_TAG_FORM = _GAP + "/?" + _GAP + "(?i:" + "|".join(FENCE_TAGS) + r")(?![\w-])"
# The escape itself is case-sensitive (`&LT;` is not ours to touch), the tag name is not.
_ESCAPE = re.compile(r"(<|&(?:amp;)*lt;)(?=" + _TAG_FORM + ")")
_RESTORE = re.compile(r"&((?:amp;)*)lt;(?=" + _TAG_FORM + ")")
# What a host fence looks like to a reader (any case, whitespace, attributes).
FENCE_PATTERN = re.compile("<" + _TAG_FORM)
_SURROGATE = re.compile("[\ud800-\udfff]")


def neutralize(text: str) -> str:
    """Escape every fence tag form in `text` so it cannot open or close a host fence."""
    if "<" not in text and "&" not in text:
        return text
    return _ESCAPE.sub(_escape_one, text)


def scrub(text: str) -> str:
    """Replace lone surrogates (invalid in UTF-8, so unsendable) with U+FFFD; else unchanged."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _escape_one(match: re.Match[str]) -> str:
    found = match.group(1)
    return "&lt;" if found == "<" else "&amp;" + found[1:]


def restore(text: str) -> str:
    """Undo `neutralize`: restore(neutralize(t)) == t for every string t."""
    return _RESTORE.sub(_restore_one, text)


def _restore_one(match: re.Match[str]) -> str:
    ampersands = match.group(1)
    return "<" if not ampersands else "&" + ampersands[len("amp;") :] + "lt;"


# --- names and other one-line values ------------------------------------------------------------

NAME_MAX_CHARS = 80
HANDLE_MAX_CHARS = 64
ELLIPSIS = "…"


def one_line(text: str, max_chars: int) -> str:
    """Collapse `text` to a single line of at most `max_chars` characters.

    Every control, format and separator character (line breaks of every kind, tabs, zero-width and
    bidi controls) becomes a space, runs of spaces collapse, and the ends are trimmed. The result
    is not neutralized: the place that renders it does that.
    """
    cleaned = "".join(" " if _breaks_line(ch) else ch for ch in text)
    collapsed = " ".join(cleaned.split())
    if len(collapsed) <= max_chars:
        return collapsed
    return collapsed[: max_chars - 1].rstrip() + ELLIPSIS


_LINE_BREAKING = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs", "Cs"})


def _breaks_line(ch: str) -> bool:
    return unicodedata.category(ch) in _LINE_BREAKING


def handle_text(handle: str | None) -> str:
    """A handle as shown after `@`: one token, no leading `@`, bounded; "" when there is none."""
    if not handle:
        return ""
    cleaned = one_line(handle, HANDLE_MAX_CHARS + 1).replace(" ", "_").lstrip("@")
    return cleaned[:HANDLE_MAX_CHARS]


def person_label(name: str, handle: str | None) -> str:
    """`Display Name (@handle)`, `Display Name` or `@handle`: one line, bounded, not neutralized."""
    shown = one_line(name, NAME_MAX_CHARS)
    tag = handle_text(handle)
    if shown and tag:
        return f"{shown} (@{tag})"
    if tag:
        return f"@{tag}"
    return shown or "someone"


# --- byte bounds --------------------------------------------------------------------------------


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` within `max_bytes` bytes of UTF-8 (never half a character)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def split_lines(text: str) -> list[str]:
    """Split on every line break Python knows (\\n, \\r, \\u2028, ...), keeping empty lines."""
    return text.splitlines() or [""]
