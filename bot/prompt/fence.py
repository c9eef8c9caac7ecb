"""Untrusted text made safe for the prompt: fence-tag neutralization, one-line names, bounds.

The host marks parts of a user message with a few XML-like tags (its "fences"). Text the host did
not write (message bodies, display names, surface names, the person's own words, recalled memory)
must never open or close one of those fences. A model reads look-alikes as the tag they resemble
(`＜ｓреаkеr>`, `‹speaker>`, `<turn_conтext>`), and no list of look-alike spellings of the tag
names is ever complete (Unicode's confusables map Cyrillic `т` to small capital `ᴛ`, not to `t`).
So no tag is looked for: every character that folds to `<` (`bot.prompt.lookalike`: `<`, `＜`,
`‹`, `〈`, `˂`, ...) is escaped wherever it is, whatever follows it: `<` becomes `&lt;`, a
look-alike `X` becomes `&#xHEX;`. Without an opener nothing can read as a tag. Nothing else
changes, so the words stay readable (text without such a character is returned as it is), and
the escape is reversible (`restore`): an `&lt;` or `&#xHEX;` (or `&amp;lt;`, ...) already in the
text gains one more `amp;`, so escaping never merges with text that merely looks escaped.
`fence_forms` still finds tag forms (folded), for the tests and the checks that look for them.
"""

from __future__ import annotations

import bisect
import re
import unicodedata

from bot.prompt.lookalike import fold, fold_pieces, word_pattern

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

# After an opener, in folded text: blanks, an optional slash, blanks, then a fence tag name not
# followed by another name character (so `<speakers>` or `<skill-x` are not fence tags).
_NAMES = "|".join(word_pattern(tag) for tag in FENCE_TAGS)
_TAG_AFTER = re.compile(" */? *(?:" + _NAMES + r")(?![\w-])")
_FOLDED_FORM = re.compile("<" + _TAG_AFTER.pattern)
# What the escape writes (and so what an earlier escape looks like): case-sensitive on purpose.
_ESCAPED = re.compile(r"&((?:amp;)*)(lt|#x[0-9A-F]+);")
_SURROGATE = re.compile("[\ud800-\udfff]")


def fence_forms(text: str) -> list[str]:
    """Every span of `text` a model would read as a fence tag (found folded), in order."""
    if _FOLDED_FORM.search(fold(text)) is None:
        return []
    folded = _Folded(text)
    return [text[start:end] for start, end in folded.spans()]


def neutralize(text: str) -> str:
    """Escape every character of `text` that reads as `<`, so nothing in it opens or closes a
    host fence; text without one (and without an earlier escape) is returned unchanged."""
    if text.isascii() and "<" not in text and "&" not in text:
        return text
    if "<" not in fold(text) and "&" not in text:
        return text
    # Each distinct character is folded once; the openers are then found at C speed.
    distinct = "".join(set(text))
    openers = [
        ch for ch, piece in zip(distinct, fold_pieces(distinct), strict=True) if "<" in piece
    ]
    edits: dict[int, str] = {}
    if openers:
        found = re.finditer("[" + "".join(map(re.escape, openers)) + "]", text)
        edits = {match.start(): _escape_opener(match.group()) for match in found}
    for match in _ESCAPED.finditer(text):
        edits[match.start()] = "&amp;"  # the `&` of what looks escaped gains one `amp;`
    return _apply(text, edits) if edits else text


def restore(text: str) -> str:
    """Undo `neutralize`: restore(neutralize(t)) == t for every string t."""
    if "&" not in text:
        return text
    return _ESCAPED.sub(_restore_one, text)


class _Folded:
    """The folded copy of a text with the folded offset at which each of its characters starts."""

    def __init__(self, text: str) -> None:
        pieces = fold_pieces(text)
        self.starts = [0]
        for piece in pieces:
            self.starts.append(self.starts[-1] + len(piece))
        self.text = "".join(pieces)

    def spans(self) -> list[tuple[int, int]]:
        """Where each fence tag form is, as character offsets of the original text."""
        return [
            (
                bisect.bisect_right(self.starts, m.start()) - 1,
                bisect.bisect_left(self.starts, m.end()),
            )
            for m in _FOLDED_FORM.finditer(self.text)
        ]


def _escape_opener(ch: str) -> str:
    return "&lt;" if ch == "<" else f"&#x{ord(ch):X};"


def _restore_one(match: re.Match[str]) -> str:
    ampersands, body = match.group(1), match.group(2)
    if ampersands:
        return "&" + ampersands[len("amp;") :] + body + ";"
    return "<" if body == "lt" else chr(int(body[2:], 16))


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
