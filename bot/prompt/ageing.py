"""Tool results age (SPEC §5): a result older than the newest turns is replayed as a short
reference (the tool, its arguments in brief, the result's size, and how to read it again with
`tool_result_fetch`) instead of in full.

The store ages a conversation only at the moments its replayed prefix changes anyway (history
halved at its message bound, or replaced by a compaction), so between those moments the prefix
stays byte-stable and cached. The result itself stays stored with its reference, for the fetch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot.errors import ToolError
from bot.ports.tools import ToolSpec
from bot.prompt.fence import neutralize, one_line, scrub
from bot.turns import HistoryEntry, ToolResultBlock, ToolUseBlock

FETCH_TOOL = "tool_result_fetch"
_ARGUMENTS_MAX_CHARS = 160
REFERENCE = (
    "[An earlier result of {call} ({size:,} bytes{failed}), not repeated here. To read it again, "
    'call {fetch} with id "{id}".]'
)


FETCH_SPEC = ToolSpec(
    name=FETCH_TOOL,
    description=(
        "Read again, in full, an earlier tool result of this conversation that history shows "
        "only as a short reference. Pass the id the reference gives."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "string", "description": "the id from the reference"}},
        "required": ["id"],
        "additionalProperties": False,
    },
)


class ResultFetch:
    """`tool_result_fetch`, read-only: the results of this conversation's own history, by id,
    as they were first returned (fenced and bounded then)."""

    spec = FETCH_SPEC

    def __init__(self, history: Sequence[HistoryEntry]) -> None:
        self._results = {
            block.tool_use_id: block
            for entry in history
            for block in entry.blocks
            if isinstance(block, ToolResultBlock)
        }

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        wanted = arguments.get("id")
        found = self._results.get(wanted) if isinstance(wanted, str) else None
        if found is None:
            shown = one_line(scrub(str(wanted)), 80)
            raise ToolError(f"no earlier tool result with id {shown!r} in this conversation")
        return found.content


def aged(entries: Sequence[HistoryEntry], keep_turns: int) -> list[HistoryEntry]:
    """`entries` with every tool result before the newest `keep_turns` turns replaced by its
    reference (0: none ages). A turn starts at a person's message; a result shorter than its
    reference stays as it is."""
    if keep_turns <= 0:
        return list(entries)
    starts = [i for i, entry in enumerate(entries) if _opens_turn(entry)]
    if len(starts) <= keep_turns:
        return list(entries)
    cutoff = starts[-keep_turns]
    calls = {
        block.id: block
        for entry in entries
        for block in entry.blocks
        if isinstance(block, ToolUseBlock)
    }
    return [_aged_entry(e, calls) if i < cutoff else e for i, e in enumerate(entries)]


def has_aged(entries: Sequence[HistoryEntry]) -> bool:
    return any(
        isinstance(block, ToolResultBlock) and block.aged
        for entry in entries
        for block in entry.blocks
    )


def reference(call: ToolUseBlock | None, result: ToolResultBlock) -> str:
    """The short form of `result`: which call it answered, in brief, and how to fetch it."""
    if call is None:
        what = "a tool call"
    else:
        arguments = json.dumps(dict(call.input), ensure_ascii=False, sort_keys=True, default=str)
        brief = neutralize(one_line(scrub(arguments), _ARGUMENTS_MAX_CHARS))
        what = f"{call.name} {brief}"
    return REFERENCE.format(
        call=what,
        size=len(result.content.encode(errors="replace")),
        failed=", an error" if result.is_error else "",
        fetch=FETCH_TOOL,
        id=result.tool_use_id,
    )


def _opens_turn(entry: HistoryEntry) -> bool:
    if entry.role != "user" or entry.summary:
        return False
    return not any(isinstance(block, ToolResultBlock) for block in entry.blocks)


def _aged_entry(entry: HistoryEntry, calls: dict[str, ToolUseBlock]) -> HistoryEntry:
    blocks = tuple(
        _aged_block(block, calls) if isinstance(block, ToolResultBlock) else block
        for block in entry.blocks
    )
    if blocks == entry.blocks:
        return entry
    before = sum(_replayed(b) for b in entry.blocks)
    after = sum(_replayed(b) for b in blocks)
    tokens = -(-entry.tokens * after // before) if before else entry.tokens  # scaled, not counted
    return replace(entry, blocks=blocks, tokens=tokens)


def _aged_block(block: ToolResultBlock, calls: dict[str, ToolUseBlock]) -> ToolResultBlock:
    if block.aged:
        return block
    short = reference(calls.get(block.tool_use_id), block)
    return replace(block, aged=short) if len(short) < len(block.content) else block


def _replayed(block: object) -> int:
    if isinstance(block, ToolResultBlock):
        return len(block.aged or block.content) + 1
    return len(getattr(block, "text", "")) + 1
