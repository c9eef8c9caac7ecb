"""The Messages API wire shapes the tool loop builds: round messages, entries, cache breakpoints.

The assembler builds the turn's request; the tool loop only appends to its `messages`. Here live
the conversions between what the API returned and what the loop sends back or stores:

- an assistant message is replayed exactly as returned (thinking blocks included: the API wants
  them back within a tool loop), but its HistoryEntry keeps only text and tool calls;
- the last-message cache breakpoint moves to the end of the newest round, so each round re-reads
  the previous one, within the API's limit of four `cache_control` blocks.
- what the assembly span says of a request: its size and its cache breakpoints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from anthropic.types import ContentBlock

from bot.ports.model import AssembledRequest
from bot.ports.records import Usage
from bot.ports.tools import ToolImage
from bot.prompt.history import tool_result_block
from bot.turns import Block, HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

MAX_BREAKPOINTS = 4
# Rounds of one turn follow each other within seconds: the default 5-minute lifetime suffices.
ROUND_CACHE_CONTROL: Mapping[str, str] = {"type": "ephemeral"}


def block_dict(block: ContentBlock) -> dict[str, Any]:
    """One returned content block as the request form the API accepts back."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return block.model_dump(mode="json", exclude_none=True)


def assistant_message(content: Sequence[ContentBlock]) -> dict[str, Any]:
    """The assistant turn to replay; empty text blocks are dropped (the API refuses them)."""
    blocks = [block_dict(b) for b in content if not (b.type == "text" and not b.text)]
    return {"role": "assistant", "content": blocks}


def results_message(
    results: Sequence[ToolResultBlock], images: Mapping[str, Sequence[ToolImage]] | None = None
) -> dict[str, Any]:
    """The round's results; a result with images (by tool_use id) carries them after its text."""
    blocks = [tool_result_block(r) for r in results]
    for block in blocks:
        shown = (images or {}).get(block["tool_use_id"])
        if shown:
            block["content"] = [
                {"type": "text", "text": block["content"]},
                *(_image(image) for image in shown),
            ]
    return {"role": "user", "content": blocks}


ROUND_RESULT_LEFT_OUT = (
    "[The result of this call ({size} bytes) was read in an earlier round of this turn and is "
    "left out here to fit the context window.]"
)


_LEFT_OUT_OPENING = ROUND_RESULT_LEFT_OUT.split("{", 1)[0]


def shrunk_rounds(rounds: Sequence[Mapping[str, Any]], keep: int = 2) -> list[dict[str, Any]]:
    """The rounds with every tool result but those of the newest `keep` messages replayed as
    a short note: what a long tool loop sends instead of overflowing the window."""
    older = [_results_left_out(message) for message in rounds[:-keep]]
    return [*older, *(dict(message) for message in rounds[-keep:])]


def _results_left_out(message: Mapping[str, Any]) -> dict[str, Any]:
    if message.get("role") != "user":
        return dict(message)
    return {**message, "content": [_result_left_out(b) for b in _content_blocks(message)]}


def _result_left_out(block: Any) -> Any:
    if not isinstance(block, Mapping) or block.get("type") != "tool_result":
        return block
    content = block.get("content", "")
    if isinstance(content, str) and content.startswith(_LEFT_OUT_OPENING):
        return block  # left out already
    size = len(json.dumps(content, ensure_ascii=False).encode())
    return {**block, "content": ROUND_RESULT_LEFT_OUT.format(size=size)}


def _image(image: ToolImage) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.media_type, "data": image.data}
    return {"type": "image", "source": source}


def text_of(content: Sequence[ContentBlock]) -> str:
    return "".join(block.text for block in content if block.type == "text")


def tool_calls(content: Sequence[ContentBlock]) -> list[ToolUseBlock]:
    return [
        ToolUseBlock(block.id, block.name, dict(block.input))
        for block in content
        if block.type == "tool_use"
    ]


def assistant_entry(text: str, calls: Sequence[ToolUseBlock] = ()) -> HistoryEntry:
    """The stored form of an assistant message: text and tool calls, never thinking."""
    blocks: list[Block] = [TextBlock(text)] if text else []
    blocks += calls
    return HistoryEntry("assistant", tuple(blocks), at=datetime.now(UTC))


def results_entry(results: Sequence[ToolResultBlock]) -> HistoryEntry:
    return HistoryEntry("user", tuple(results), at=datetime.now(UTC))


def usage_of(raw: Any) -> Usage:
    """Our Usage from the SDK's usage object (cache fields may be absent or None)."""
    return Usage(
        input_tokens=int(getattr(raw, "input_tokens", 0) or 0),
        cache_read_tokens=int(getattr(raw, "cache_read_input_tokens", 0) or 0),
        cache_write_tokens=int(getattr(raw, "cache_creation_input_tokens", 0) or 0),
        output_tokens=int(getattr(raw, "output_tokens", 0) or 0),
        cache_write_1h_tokens=int(
            getattr(getattr(raw, "cache_creation", None), "ephemeral_1h_input_tokens", 0) or 0
        ),
    )


def total_input(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


# --- cache breakpoints ----------------------------------------------------------------------------


def _content_blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def count_breakpoints(body: Mapping[str, Any]) -> int:
    return len(cache_marks(body))


def cache_marks(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every `cache_control` mark in the request, in order (tools, system, messages)."""
    system = body.get("system")
    blocks: list[Any] = [*(body.get("tools") or []), *(system if isinstance(system, list) else [])]
    for message in body.get("messages") or []:
        blocks += _content_blocks(message)
    return [
        b["cache_control"]
        for b in blocks
        if isinstance(b, Mapping) and isinstance(b.get("cache_control"), Mapping)
    ]


def _without_cache_control(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return dict(message)
    stripped = [
        {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, Mapping) else b
        for b in content
    ]
    return {**message, "content": stripped}


def _with_cache_control(message: Mapping[str, Any]) -> dict[str, Any]:
    content = list(_content_blocks(message))
    if not content:
        return dict(message)
    content[-1] = {**content[-1], "cache_control": dict(ROUND_CACHE_CONTROL)}
    return {**message, "content": content}


def extend_messages(body: Mapping[str, Any], rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`body` with this turn's tool-round messages appended and a breakpoint on the newest one.

    When the assembler already used every breakpoint, the oldest message-level ones give way (the
    provider looks back up to 20 blocks from a breakpoint, so the round's breakpoint still finds
    the history prefix). With all four spent on tools and system, the rounds go uncached.
    """
    messages = [dict(m) for m in body.get("messages") or []]
    if not rounds:
        return {**body, "messages": messages}
    used = count_breakpoints(body)
    for index, message in enumerate(messages):
        if used < MAX_BREAKPOINTS:
            break
        marked = sum(1 for b in _content_blocks(message) if "cache_control" in b)
        if marked:
            messages[index] = _without_cache_control(message)
            used -= marked
    tail = [_without_cache_control(m) for m in rounds]
    if used < MAX_BREAKPOINTS:
        tail[-1] = _with_cache_control(tail[-1])
    return {**body, "messages": messages + tail}


def cache_figures(assembled: AssembledRequest) -> dict[str, int | str | bool]:
    """What the assembly span says of the request: its size and its cache breakpoints."""
    body = assembled.body
    ttls = sorted({str(mark.get("ttl", "5m")) for mark in cache_marks(body)})
    return {
        "bot.prompt.estimated_tokens": assembled.estimated_tokens,
        "bot.prompt.history_used": assembled.history_used,
        "bot.prompt.floor_unmet": assembled.floor_unmet,
        "bot.cache.breakpoints": count_breakpoints(body),
        "bot.cache.ttl": ",".join(ttls) or "none",
    }
