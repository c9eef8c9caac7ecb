"""Splitting one formatted Slack answer into parts that each fit one message.

Slack accepts long messages but renders them poorly and truncates past 40,000 characters, so an
answer is posted in parts of at most `MESSAGE_BUDGET` characters. The same constant is the
`message_budget` of every Slack surface, so what the prompt promises is what is enforced here.

Cuts fall on a paragraph boundary, else a line break, else a space, else anywhere (never inside
an `&amp;`-style entity). A part that ends inside a code block closes it and the next part
reopens it, so every part renders on its own. The whitespace at a cut is dropped; nothing else is.
"""

from __future__ import annotations

import re

MESSAGE_BUDGET = 3800

FENCE = "```"
_CLOSE = "\n" + FENCE  # what a part inside a code block gets at its end
_REOPEN = FENCE + "\n"  # and what the next part starts with
# The smallest limit that still leaves room for text between a reopened and a closed fence.
MIN_LIMIT = len(_REOPEN) + len(_CLOSE) + 8
_ENTITY_TAIL = re.compile(r"&[a-z]{0,3}$")
_LEADING_BLANK_LINES = re.compile(r"^(?:[ \t]*\n)+")


def split_message(text: str, limit: int = MESSAGE_BUDGET) -> list[str]:
    """Cut `text` into parts of at most `limit` characters with balanced code fences."""
    if limit < MIN_LIMIT:
        raise ValueError(f"split limit {limit} is too small; use at least {MIN_LIMIT}")
    parts: list[str] = []
    # Leading blank lines and trailing whitespace go; leading spaces on the first line stay,
    # as stripping them could turn "  ```" (text) into a fence.
    rest = _LEADING_BLANK_LINES.sub("", text).rstrip()
    in_code = False
    while rest:
        head = _REOPEN if in_code else ""
        part, rest, in_code = _take(head, rest, limit)
        if _has_text(part):
            parts.append(part)
    return parts


def is_fence(line: str) -> bool:
    return line.startswith(FENCE)


def _has_text(part: str) -> bool:
    return any(line.strip() and not is_fence(line) for line in part.split("\n"))


def ends_in_code(text: str) -> bool:
    """Whether a code block is still open at the end of `text`."""
    return sum(1 for line in text.split("\n") if is_fence(line)) % 2 == 1


def _take(head: str, rest: str, limit: int) -> tuple[str, str, bool]:
    """The next part, what remains after it, and whether a code block continues into it."""
    whole = head + rest
    if ends_in_code(whole):
        whole += _CLOSE
    if len(whole) <= limit:
        return whole, "", False
    room = limit - len(head) - len(_CLOSE)
    shorter = _shorten_fence(rest, room)
    if shorter != rest:
        return _take(head, shorter, limit)
    cut, skip = _cut_point(rest, room)
    chunk, remainder = rest[:cut], rest[cut + skip :].lstrip("\n")
    part = head + chunk
    if not ends_in_code(part):
        return part, remainder, False
    # Inside a code block: when its own closing fence comes next, use it instead of ours.
    if skip and (remainder == FENCE or remainder.startswith(FENCE + "\n")):
        return part + "\n" + FENCE, remainder[len(FENCE) :].lstrip("\n"), False
    return part + _CLOSE, remainder, True


def _shorten_fence(rest: str, room: int) -> str:
    """A fence line too long for any part loses its info string (Slack ignores it anyway)."""
    first = rest.split("\n", 1)[0]
    if is_fence(first) and len(first) > room:
        return FENCE + rest[len(first) :]
    return rest


def _cut_point(rest: str, room: int) -> tuple[int, int]:
    """Where to cut within `rest[:room]` and how many separator characters to drop there.

    A cut in the middle of a line must not leave three backticks at the start of the next part,
    where they would read as a fence.
    """
    window = rest[: room + 1]  # a separator right at the edge still counts
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, 0, room + 1)
        if at > 0:
            return at, len(separator)
    at = room + 1
    while (at := window.rfind(" ", 0, at)) > 0:
        if not rest.startswith(FENCE, at + 1):
            return at, 1
    return _hard_cut(rest, room), 0


def _hard_cut(rest: str, room: int) -> int:
    cut = room
    while cut > 1 and rest[cut] == "`":
        cut -= 1
    entity = _ENTITY_TAIL.search(rest[:cut])
    if entity is not None and entity.start() > 0:
        cut = entity.start()
    return cut
