"""The tool loop's rounds in neutral form: the request with this turn's rounds appended, the
entries a round stores, and what the assembly span says of a request.

The assembler builds the turn's request; each round appends the assistant message as returned
and the tool results, with a cache position after the newest round, so each round re-reads the
previous one (a wire with a limit on breakpoints enforces it when it encodes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from bot.ports.model import AssembledRequest
from bot.ports.records import Usage
from bot.ports.request import Image, Message, ModelRequest, Part, Text, ToolResult
from bot.ports.tools import ToolImage
from bot.prompt.history import tool_result
from bot.turns import Block, HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

ROUND_NOTE = (
    "(The limit of {limit} tool rounds for one answer is reached. Answer now with what you "
    "have; no more tool calls.)"
)


def with_rounds(
    request: ModelRequest, rounds: Sequence[Message], *, last: int | None = None
) -> ModelRequest:
    """`request` with this turn's round messages appended, a cache position after the newest;
    `last`: the round limit was reached, so the tools are off and the model is told why."""
    if not rounds:
        return request
    tail = [Message(m.role, m.parts) for m in rounds]
    if last is not None:
        note = Text(ROUND_NOTE.format(limit=last))
        tail[-1] = Message(tail[-1].role, (*tail[-1].parts, note))
    # Rounds of one turn follow each other within seconds: the 5-minute lifetime suffices.
    tail[-1] = replace(tail[-1], cache="5m")
    return replace(
        request,
        messages=(*request.messages, *tail),
        tool_choice="none" if last is not None else request.tool_choice,
    )


ROUND_RESULT_LEFT_OUT = (
    "[The result of this call ({size} bytes) was read in an earlier round of this turn and is "
    "left out here to fit the context window.]"
)
_LEFT_OUT_OPENING = ROUND_RESULT_LEFT_OUT.split("{", 1)[0]


def shrunk_rounds(messages: Sequence[Message], keep: int = 2) -> list[Message]:
    """The rounds with every tool result but those of the newest `keep` messages replayed as
    a short note: what a long tool loop sends instead of overflowing the window."""
    older = [_results_left_out(message) for message in messages[:-keep]]
    return [*older, *messages[-keep:]]


def _results_left_out(message: Message) -> Message:
    if message.role != "user":
        return message
    return replace(message, parts=tuple(map(_result_left_out, message.parts)))


def _result_left_out(part: Part) -> Part:
    if not isinstance(part, ToolResult) or part.content.startswith(_LEFT_OUT_OPENING):
        return part  # not a result, or left out already
    size = len(json.dumps(part.content, ensure_ascii=False).encode())
    size += sum(len(image.data) for image in part.images)
    note = ROUND_RESULT_LEFT_OUT.format(size=size)
    return ToolResult(part.call_id, note, part.is_error)


def results_message(
    results: Sequence[ToolResultBlock], images: Mapping[str, Sequence[ToolImage]] | None = None
) -> Message:
    """The round's results; a result with images (by call id) carries them after its text."""
    parts = []
    for result in results:
        part = tool_result(result)
        shown = (images or {}).get(result.tool_use_id)
        if shown:
            part = replace(part, images=tuple(Image(i.media_type, i.data) for i in shown))
        parts.append(part)
    return Message("user", tuple(parts))


def assistant_entry(text: str, calls: Sequence[ToolUseBlock] = ()) -> HistoryEntry:
    """The stored form of an assistant message: text and tool calls, never thinking."""
    blocks: list[Block] = [TextBlock(text)] if text else []
    blocks += calls
    return HistoryEntry("assistant", tuple(blocks), at=datetime.now(UTC))


def results_entry(results: Sequence[ToolResultBlock]) -> HistoryEntry:
    return HistoryEntry("user", tuple(results), at=datetime.now(UTC))


def total_input(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


def cache_figures(assembled: AssembledRequest) -> dict[str, int | str | bool]:
    """What the assembly span says of the request: its size and its cache positions."""
    request = assembled.request
    marks = [s.cache for s in request.sections if s.cache]
    marks += [m.cache for m in request.messages if m.cache]
    return {
        "bot.prompt.estimated_tokens": assembled.estimated_tokens,
        "bot.prompt.history_used": assembled.history_used,
        "bot.prompt.floor_unmet": assembled.floor_unmet,
        "bot.cache.breakpoints": len(marks),
        "bot.cache.ttl": ",".join(sorted(set(marks))) or "none",
    }
