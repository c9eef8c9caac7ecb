"""A neutral request within what a model accepts (`capabilities`), for a wire whose encoder
sends every part as it is (Anthropic's): images and documents the model does not read become
the notes the OpenAI-compatible wire uses; without tools, no tool definitions go, and the calls
and results in the history are told as text. A model that accepts everything gets the request
unchanged (the same bytes)."""

from __future__ import annotations

import json
from dataclasses import replace

from bot.config.providers import Capabilities
from bot.model.openai_wire import NO_DOCUMENTS, NO_IMAGES
from bot.ports.request import (
    Document,
    Image,
    ModelRequest,
    Part,
    Text,
    ToolCall,
    ToolResult,
)


def within(request: ModelRequest, caps: Capabilities) -> ModelRequest:
    """`request` without what `caps` rules out."""
    if caps.images and caps.documents and caps.tools:
        return request
    messages = tuple(
        replace(m, parts=tuple(p for part in m.parts for p in _parts(part, caps)))
        for m in request.messages
    )
    tools = request.tools if caps.tools else ()
    return replace(request, messages=messages, tools=tools)


def _parts(part: Part, caps: Capabilities) -> list[Part]:
    if isinstance(part, Image) and not caps.images:
        return [Text(NO_IMAGES)]
    if isinstance(part, Document) and not caps.documents:
        return [Text(NO_DOCUMENTS)]
    if not caps.tools and isinstance(part, ToolCall):
        arguments = json.dumps(dict(part.input), ensure_ascii=False, sort_keys=True)
        return [Text(f"[Called the tool {part.name} with {arguments}]")]
    if not caps.tools and isinstance(part, ToolResult):
        outcome = "failed" if part.is_error else "returned"
        told: list[Part] = [Text(f"[The tool call {part.call_id} {outcome}: {part.content}]")]
        return told + [p for image in part.images for p in _parts(image, caps)]
    if isinstance(part, ToolResult) and not caps.images and part.images:
        return [replace(part, images=()), Text(NO_IMAGES)]
    return [part]
