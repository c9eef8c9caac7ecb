"""`read_attachment`: the model reads a long text file someone shared in this conversation, a line
or byte range at a time. Read-only, scoped to the conversation's own attachments, bounded output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.errors import ToolError
from bot.ports import AttachmentStore, ToolSpec
from bot.prompt.fence import neutralize, scrub

MAX_OUTPUT_CHARS = 16_000
DEFAULT_LINES = 200

READ_ATTACHMENT_SPEC = ToolSpec(
    name="read_attachment",
    description=(
        "Read part of a text file that someone shared in this conversation, when its marker "
        "says only the start is shown. Pass the id from the marker and either a line range "
        "(start_line, end_line; 1-based, inclusive) or a byte range (start_byte, max_bytes). "
        f"At most {MAX_OUTPUT_CHARS:,} characters come back per call."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "the id shown in the attachment's marker"},
            "start_line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1},
            "start_byte": {"type": "integer", "minimum": 0},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_OUTPUT_CHARS},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
)


class ReadAttachmentTool:
    """The tool for one conversation: it sees only the attachments shared there."""

    spec = READ_ATTACHMENT_SPEC

    def __init__(self, store: AttachmentStore, conversation_key: str) -> None:
        self._store = store
        self._key = conversation_key

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        wanted = arguments.get("id")
        if not isinstance(wanted, str) or not wanted.strip():
            raise ToolError("pass the id from the attachment's marker, e.g. {'id': '3f2a9c...'}")
        found = await self._store.find(self._key, wanted.strip().lower())
        if found is None:
            raise ToolError(
                f"no attachment with id {wanted[:64]!r} was shared in this conversation"
            )
        if not found.media_type.startswith(("text/", "application/")) or found.media_type in (
            "application/pdf",
        ):
            raise ToolError("that attachment is not a text file; its content is in the message")
        text = found.data.decode("utf-8", errors="replace")
        if "start_byte" in arguments or "max_bytes" in arguments:
            head, body = _byte_range(found.data, arguments)
        else:
            head, body = _line_range(text, arguments)
        return f'<attachment id="{found.content_id[:16]}">\n{head}\n{_safe(body)}\n</attachment>'


def _number(arguments: Mapping[str, Any], name: str, default: int) -> int:
    value = arguments.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolError(f"{name} must be a non-negative whole number")
    return value


def _line_range(text: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
    lines = text.splitlines()
    start = max(1, _number(arguments, "start_line", 1))
    end = _number(arguments, "end_line", start + DEFAULT_LINES - 1)
    if end < start:
        raise ToolError("end_line must not be before start_line")
    if start > len(lines):
        raise ToolError(f"the file has {len(lines)} lines; start_line {start} is past its end")
    shown: list[str] = []
    size = 0
    for line in lines[start - 1 : end]:
        if size + len(line) + 1 > MAX_OUTPUT_CHARS:
            break
        shown.append(line)
        size += len(line) + 1
    last = start + len(shown) - 1
    if not shown:  # one line longer than the whole budget: its start
        shown, last = [lines[start - 1][:MAX_OUTPUT_CHARS]], start
    return f"[lines {start}-{last} of {len(lines)}]", "\n".join(shown)


def _byte_range(data: bytes, arguments: Mapping[str, Any]) -> tuple[str, str]:
    start = _number(arguments, "start_byte", 0)
    size = min(_number(arguments, "max_bytes", MAX_OUTPUT_CHARS), MAX_OUTPUT_CHARS)
    if start >= len(data):
        raise ToolError(f"the file has {len(data)} bytes; start_byte {start} is past its end")
    chunk = data[start : start + size].decode("utf-8", errors="ignore")
    return f"[bytes {start}-{min(start + size, len(data))} of {len(data)}]", chunk


def _safe(text: str) -> str:
    return neutralize(scrub(text))
