"""Continuity accounts (SPEC §5): what history keeps of a turn that did not complete, so the
next turn knows what was already done and never repeats a side effect by accident.

An account is the person's request plus one host-written assistant entry: that the turn did not
complete (a short reason of the host's own words: never the provider's error text, never an
operator's "Fix:" hint, which stay in the turn record and the log), every tool call that ran
with its outcome (the calls always; each result bounded), and the partial answer. The whole
account is at most `CONTINUITY_MAX_BYTES`.

`ToolsRan` collects the calls while the turn runs (the model runtime reports each call before it
runs and each result as it ends), so an account can be written however the turn ends: failed,
stopped by a person or a breaker, timed out, cancelled, or crashed in the host.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from bot.turns import AttachmentBlock, Block, HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

CONTINUITY_MAX_BYTES = 48 * 1024
USER_MAX_BYTES = 16 * 1024  # of the person's own text; the rest is the host's note
ARGUMENTS_MAX_BYTES = 600  # each call's arguments, in brief
RESULT_MAX_BYTES = 4 * 1024  # each result, at most (less when there are many)
_CUT = " […]"

# The reasons an account gives, in the host's own words.
MODEL_FAILED = "the model could not be reached or refused the request"
TIMED_OUT = "the model did not answer in time"
STOPPED_BY_PERSON = "the person stopped it"
CANCELLED = "the turn was cancelled"
HOST_FAILED = "the host failed"


class ToolsRan:
    """The tool calls of one turn so far, in order: each call as it starts, its result (a
    `ToolResultBlock`) as it ends. A call without a result was cut short while it ran."""

    def __init__(self) -> None:
        self.calls: list[ToolUseBlock] = []
        self.results: dict[str, ToolResultBlock] = {}

    def note(self, block: ToolUseBlock | ToolResultBlock) -> None:
        if isinstance(block, ToolUseBlock):
            self.calls.append(block)
        else:
            self.results[block.tool_use_id] = block


def continuity_account(
    user_entry: HistoryEntry,
    partial: str,
    reason: str,
    ran: ToolsRan | None = None,
    added: Sequence[HistoryEntry] = (),
) -> list[HistoryEntry]:
    """The request (and the later messages `added` to the turn while it ran, SPEC §19) plus one
    host-written entry saying plainly the turn did not complete, with the calls that ran and
    the partial text; at most CONTINUITY_MAX_BYTES in all."""
    each = USER_MAX_BYTES // (1 + len(added))  # the person's words share the user's room
    said = [_bounded_user(entry, each) for entry in (user_entry, *added)]
    room = CONTINUITY_MAX_BYTES - sum(
        _size(entry.text) + sum(_size(b.name) for b in _files(entry)) for entry in said
    )
    note = f"[The host: this turn did not complete ({reason}). The person got no full answer.]"
    if added:
        note += f"\n[{len(added)} later message(s) were added to this turn while it ran.]"
    calls = list(ran.calls) if ran is not None else []
    if calls:
        note += "\n" + _calls_text(calls, ran.results if ran is not None else {}, room - 2048)
    if partial.strip():
        head = "\n[Partial answer before it stopped:]\n"
        left = room - _size(note) - _size(head)
        if left > 0:
            note += head + _cut(partial, left)
    note = _cut(note, room)
    return [*said, HistoryEntry("assistant", (TextBlock(note),), at=user_entry.at)]


def _calls_text(
    calls: Sequence[ToolUseBlock], results: dict[str, ToolResultBlock], room: int
) -> str:
    """Every call (name and arguments in brief) with its outcome; results share what is left."""
    lines = [
        "[Tool calls that ran in this turn, in order. Each one took effect as its outcome "
        "says; do not run one again unless the person asks for it again.]"
    ]
    args_room = max(min(ARGUMENTS_MAX_BYTES, room // (2 * len(calls)) - 64), 0)
    heads = [f"{i}. {call.name} {_arguments(call, args_room)}" for i, call in enumerate(calls, 1)]
    left = room - sum(_size(line) + 1 for line in [*lines, *heads])
    share = max(min(RESULT_MAX_BYTES, left // len(calls) - 32), 0)
    for call, head in zip(calls, heads, strict=True):
        lines.append(f"{head} -> {_outcome(results.get(call.id), share)}")
    return "\n".join(lines)


def _arguments(call: ToolUseBlock, room: int) -> str:
    text = json.dumps(dict(call.input), ensure_ascii=False, sort_keys=True, default=str)
    return _cut(text, room) if room > 0 else "{…}"


def _outcome(result: ToolResultBlock | None, room: int) -> str:
    if result is None:
        return "cut short while it ran: whether it took effect is not known"
    label = "failed" if result.is_error else "ok"
    content = " ".join(result.content.split())  # one line: a result cannot pose as a new call
    if not content:
        return label
    size = _size(content)
    if room <= 0:
        return f"{label} ({size} bytes, not kept)"
    return f"{label}: {_cut(content, room)}"


def _bounded_user(entry: HistoryEntry, most: int = USER_MAX_BYTES) -> HistoryEntry:
    text = entry.text
    if _size(text) <= most:
        return entry
    blocks: tuple[Block, ...] = (TextBlock(_cut(text, most)), *_files(entry))
    return replace(entry, blocks=blocks, tokens=0)


def _files(entry: HistoryEntry) -> list[AttachmentBlock]:
    return [b for b in entry.blocks if isinstance(b, AttachmentBlock)]


def _cut(text: str, room: int) -> str:
    """`text` in at most `room` UTF-8 bytes, marked where it was cut."""
    if _size(text) <= room:
        return text
    keep = max(room - _size(_CUT), 0)
    return text.encode()[:keep].decode(errors="ignore") + (_CUT if room >= _size(_CUT) else "")


def _size(text: str) -> int:
    return len(text.encode(errors="replace"))
