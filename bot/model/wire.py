"""The Anthropic Messages wire: the neutral request encoded as a request body, and an answer
decoded back into neutral parts.

- sections become the `system` text blocks and messages the `messages` list (consecutive
  messages of one role merged into one, as the API wants them alternating); each cache position
  becomes a `cache_control` mark on the block it follows, within the API's limit of four (the
  oldest message-level marks give way: the provider looks back up to 20 blocks from a
  breakpoint, so a newer one still finds the older prefix);
- an assistant answer is replayed exactly as returned (thinking blocks ride as `Native` parts:
  the API wants them back within a tool loop), but its HistoryEntry keeps only text and calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.model.answer import Answer
from bot.ports.records import Usage
from bot.ports.request import (
    CacheTtl,
    Document,
    Image,
    Message,
    ModelRequest,
    Native,
    Part,
    Section,
    Text,
    ToolCall,
    ToolResult,
)
from bot.turns import ToolUseBlock

if TYPE_CHECKING:  # the encoder itself needs no SDK (`bot preview` imports it)
    from anthropic.types import ContentBlock

WIRE = "anthropic"
MAX_BREAKPOINTS = 4


def encode(request: ModelRequest) -> dict[str, Any]:
    """The Messages API body for `request`."""
    sections, messages = _within_breakpoints(request.sections, request.messages)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": [_section(section) for section in sections],
        "messages": _messages(messages),
    }
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if request.tool_choice == "none":
            body["tool_choice"] = {"type": "none"}
    if request.thinking_budget > 0:
        body["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
    return body


def cache_control(ttl: CacheTtl) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def _section(section: Section) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": section.text}
    if section.cache is not None:
        block["cache_control"] = cache_control(section.cache)
    return block


def _within_breakpoints(
    sections: Sequence[Section], messages: Sequence[Message]
) -> tuple[Sequence[Section], Sequence[Message]]:
    """The oldest message-level cache positions dropped until at most four are left (the newest
    message's last)."""
    used = sum(1 for s in sections if s.cache) + sum(1 for m in messages if m.cache)
    if used <= MAX_BREAKPOINTS:
        return sections, messages
    kept = list(messages)
    for index, message in enumerate(kept):
        if used <= MAX_BREAKPOINTS:
            break
        if message.cache is not None:
            kept[index] = Message(message.role, message.parts)
            used -= 1
    return sections, kept


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    encoded: list[dict[str, Any]] = []
    for message in messages:
        blocks = [b for b in map(_part, message.parts) if b is not None]
        if message.cache is not None and blocks:
            blocks[-1]["cache_control"] = cache_control(message.cache)
        if encoded and encoded[-1]["role"] == message.role:
            encoded[-1]["content"].extend(blocks)
        else:
            encoded.append({"role": message.role, "content": blocks})
    return encoded


def _part(part: Part) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image", "source": _source(part.media_type, part.data)}
    if isinstance(part, Document):
        return {"type": "document", "source": _source(part.media_type, part.data)}
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": dict(part.input)}
    if isinstance(part, ToolResult):
        return _result(part)
    return dict(part.data) if part.wire == WIRE else None


def _source(media_type: str, data: str) -> dict[str, str]:
    return {"type": "base64", "media_type": media_type, "data": data}


def _result(part: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id}
    if part.images:
        images = [{"type": "image", "source": _source(i.media_type, i.data)} for i in part.images]
        block["content"] = [{"type": "text", "text": part.content}, *images]
    else:
        block["content"] = part.content
    if part.is_error:
        block["is_error"] = True
    return block


# --- answers ------------------------------------------------------------------------------------


def answer_of(message: Any) -> Answer:
    """A returned `anthropic.types.Message` as neutral parts (empty text blocks dropped: the API
    refuses them back)."""
    content: Sequence[ContentBlock] = message.content
    parts = [_returned(b) for b in content if not (b.type == "text" and not b.text)]
    calls = tuple(
        ToolUseBlock(b.id, b.name, dict(b.input)) for b in content if b.type == "tool_use"
    )
    return Answer(
        text="".join(b.text for b in content if b.type == "text"),
        calls=calls,
        message=Message("assistant", tuple(parts)),
        stop_reason=str(message.stop_reason),
        model=str(message.model),
        id=str(message.id),
    )


def _returned(block: ContentBlock) -> Part:
    if block.type == "text":
        return Text(block.text)
    if block.type == "tool_use":
        return ToolCall(block.id, block.name, dict(block.input))
    if block.type == "thinking":
        data = {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        return Native(WIRE, data)
    if block.type == "redacted_thinking":
        return Native(WIRE, {"type": "redacted_thinking", "data": block.data})
    return Native(WIRE, block.model_dump(mode="json", exclude_none=True))


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


# --- cache breakpoints in a body ------------------------------------------------------------------


def count_breakpoints(body: Mapping[str, Any]) -> int:
    """Every `cache_control` mark in a Messages body (tools, system, messages)."""
    system = body.get("system")
    blocks: list[Any] = [*(body.get("tools") or []), *(system if isinstance(system, list) else [])]
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks += content if isinstance(content, list) else []
    return sum(1 for b in blocks if isinstance(b, Mapping) and "cache_control" in b)
