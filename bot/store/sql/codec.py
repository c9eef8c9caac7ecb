"""How a HistoryEntry is stored: one JSON object per message, strictly decoded, size-bounded.

`decode_entry` accepts exactly what `encode_entry` writes and raises `UnreadableRecord` for anything
else, so a damaged row is detected rather than half-trusted. `bound_entry` shrinks an entry until
its stored form fits the per-message bound, keeping the head and tail of its largest texts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.errors import UnreadableRecord
from bot.turns import (
    AttachmentBlock,
    Block,
    HistoryEntry,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

_HEAD_SHARE = 0.6  # of a shortened text, the part kept from its start; the rest from its end
_SPEAKER_MAX = 512  # a speaker label is a bounded display name; this only guards the store


def encode_entry(entry: HistoryEntry) -> str:
    body: dict[str, Any] = {
        "role": entry.role,
        "blocks": [_encode_block(block) for block in entry.blocks],
        "tokens": entry.tokens,
    }
    if entry.speaker is not None:
        body["speaker"] = entry.speaker
    if entry.summary:
        body["summary"] = True
    if entry.host_note:
        body["host_note"] = True
    if entry.at is not None:
        body["at"] = entry.at.isoformat()
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _encode_block(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if isinstance(block, AttachmentBlock):
        return _encode_attachment(block)
    encoded: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
    }
    if block.is_error:
        encoded["is_error"] = True
    if block.aged:
        encoded["aged"] = block.aged
    return encoded


def decode_entry(text: str) -> HistoryEntry:
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UnreadableRecord(f"not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise UnreadableRecord("not a JSON object")
    role = body.get("role")
    if role not in ("user", "assistant"):
        raise UnreadableRecord(f"unknown role {role!r}")
    blocks = body.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        raise UnreadableRecord("no blocks")
    return HistoryEntry(
        role=role,
        blocks=tuple(_decode_block(block) for block in blocks),
        speaker=_optional(body, "speaker", str),
        tokens=_int(body.get("tokens", 0), "tokens"),
        summary=body.get("summary", False) is True,
        at=_time(body.get("at")),
        host_note=body.get("host_note", False) is True,
    )


def _decode_block(block: Any) -> Block:
    if not isinstance(block, dict):
        raise UnreadableRecord("a block is not an object")
    kind = block.get("type")
    if kind == "text":
        return TextBlock(_str(block, "text"))
    if kind == "tool_use":
        arguments = block.get("input")
        if not isinstance(arguments, dict):
            raise UnreadableRecord("tool_use input is not an object")
        return ToolUseBlock(_str(block, "id"), _str(block, "name"), arguments)
    if kind == "tool_result":
        return ToolResultBlock(
            _str(block, "tool_use_id"),
            _str(block, "content"),
            block.get("is_error") is True,
            _optional(block, "aged", str) or "",
        )
    if kind == "attachment":
        return _decode_attachment(block)
    raise UnreadableRecord(f"unknown block type {kind!r}")


def _encode_attachment(block: AttachmentBlock) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "type": "attachment",
        "index": block.index,
        "name": block.name,
        "kind": block.kind,
        "media_type": block.media_type,
        "size": block.size,
    }
    if block.content_id is not None:
        encoded["content_id"] = block.content_id
    if block.detail:
        encoded["detail"] = dict(block.detail)
    if block.problem is not None:
        encoded["problem"] = block.problem
    return encoded


def _decode_attachment(block: Mapping[str, Any]) -> AttachmentBlock:
    detail = block.get("detail", {})
    if not isinstance(detail, dict):
        raise UnreadableRecord("attachment detail is not an object")
    return AttachmentBlock(
        index=_int(block.get("index"), "index"),
        name=_str(block, "name"),
        kind=_str(block, "kind"),
        media_type=_str(block, "media_type"),
        size=_int(block.get("size"), "size"),
        content_id=_optional(block, "content_id", str),
        detail={str(k): _int(v, "detail") for k, v in detail.items()},
        problem=_optional(block, "problem", str),
    )


def _str(block: Mapping[str, Any], name: str) -> str:
    value = block.get(name)
    if not isinstance(value, str):
        raise UnreadableRecord(f"{name} is not a string")
    return value


def _optional(body: Mapping[str, Any], name: str, kind: type[str]) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, kind):
        raise UnreadableRecord(f"{name} is not a string")
    return value


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UnreadableRecord(f"{name} is not a non-negative integer")
    return value


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise UnreadableRecord("at is not a timestamp")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise UnreadableRecord("at is not a timestamp") from None


# --- bounding ------------------------------------------------------------------------------------


def bound_entry(entry: HistoryEntry, max_bytes: int) -> HistoryEntry:
    """`entry`, shortened until its stored form is at most `max_bytes` (at least 1024) long.

    The largest text, tool result or tool input is cut to its head and tail with a note of what
    was left out, repeatedly; an entry that still cannot fit is replaced by a one-line note.
    """
    size = _size(entry)
    if size <= max_bytes:
        return entry
    original = size
    bounded = entry
    if bounded.speaker is not None and len(bounded.speaker) > _SPEAKER_MAX:
        bounded = replace(bounded, speaker=bounded.speaker[:_SPEAKER_MAX])
    for _ in range(6):
        size = _size(bounded)
        if size <= max_bytes:
            return _rescaled(bounded, entry, original, size)
        bounded = _shrink_largest(bounded, size - max_bytes)
    if _size(bounded) <= max_bytes:
        return _rescaled(bounded, entry, original, _size(bounded))
    note = TextBlock(f"[this message was {original} bytes, too large to keep in history]")
    return _rescaled(replace(bounded, blocks=(note,)), entry, original, max_bytes)


def _size(entry: HistoryEntry) -> int:
    return len(encode_entry(entry).encode("utf-8"))


def _rescaled(bounded: HistoryEntry, entry: HistoryEntry, before: int, after: int) -> HistoryEntry:
    """Scale the cached token count with the size, so the budget is not charged for cut text."""
    tokens = -(-entry.tokens * after // before) if before else entry.tokens
    return replace(bounded, tokens=tokens)


def _shrink_largest(entry: HistoryEntry, excess: int) -> HistoryEntry:
    sizes = [_block_weight(block) for block in entry.blocks]
    index = max(range(len(sizes)), key=sizes.__getitem__)
    block = entry.blocks[index]
    # JSON escaping can make the stored form longer than the text; cut a little extra.
    target = max(0, sizes[index] - excess - 256 - excess // 8)
    blocks = list(entry.blocks)
    blocks[index] = _shrink_block(block, target)
    return replace(entry, blocks=tuple(blocks))


def _block_weight(block: Block) -> int:
    return len(json.dumps(_encode_block(block), ensure_ascii=False).encode("utf-8"))


def _shrink_block(block: Block, target: int) -> Block:
    if isinstance(block, TextBlock):
        return TextBlock(shorten(block.text, target))
    if isinstance(block, ToolResultBlock):
        return replace(block, content=shorten(block.content, target))
    if isinstance(block, AttachmentBlock):
        return replace(block, name=shorten(block.name, max(target, 64)))
    arguments = json.dumps(dict(block.input), ensure_ascii=False)
    return replace(block, input={"truncated_input": shorten(arguments, target)})


def shorten(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes: its head and tail and a note between."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    note = f"\n[... {len(data)} bytes, shortened ...]\n"
    room = max(0, max_bytes - len(note.encode("utf-8")))
    head_bytes = int(room * _HEAD_SHARE)
    head = data[:head_bytes].decode("utf-8", "ignore")
    tail = data[len(data) - (room - head_bytes) :].decode("utf-8", "ignore") if room else ""
    return (head + note + tail) if room else note[: max(0, max_bytes)]
