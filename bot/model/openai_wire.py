"""The OpenAI-compatible Chat Completions wire: the neutral request encoded as a request body,
and a streamed answer's chunks gathered back into neutral parts. Pure: no SDK.

- the system sections are the first messages, one `system` message each, in order: the
  byte-stable prefix that automatic prefix caching reuses (there are no breakpoints to mark);
- a user message whose parts are all text is one string (every compatible server takes that);
  images ride as `image_url` data URLs, PDFs as `file` parts, each only where the model's
  capabilities allow it, else a short note stands where it would be (the marker naming the file
  is in the text already);
- tool calls are `tool_calls` of `function` type with JSON arguments, each result a `tool`
  message right after its call's message; without the tools capability both are plain text;
- `Native` parts (another wire's, such as Anthropic's thinking) are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.config.providers import Capabilities
from bot.model.answer import Answer
from bot.ports.records import Usage
from bot.ports.request import (
    Document,
    Image,
    Message,
    ModelRequest,
    Part,
    Text,
    ToolCall,
    ToolResult,
)
from bot.turns import ToolUseBlock

WIRE = "openai"
OPENAI_HOST = "api.openai.com"
NO_IMAGES = "[The image above is not shown: this model does not read images.]"
NO_DOCUMENTS = "[The document above is not shown: this model does not read PDF files.]"


def encode(
    request: ModelRequest, capabilities: Capabilities, *, completion_tokens: bool = False
) -> dict[str, Any]:
    """The Chat Completions body for `request` (streamed, with usage in the last chunk).
    `completion_tokens`: the limit is `max_completion_tokens` (OpenAI's own API), else the
    `max_tokens` every compatible server knows."""
    tools = bool(capabilities.tools) and bool(request.tools)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": s.text} for s in request.sections
    ]
    for message in request.messages:
        messages += _message(message, capabilities, tools)
    limit = "max_completion_tokens" if completion_tokens else "max_tokens"
    body: dict[str, Any] = {"model": request.model, limit: request.max_tokens, "messages": messages}
    if tools:
        body["tools"] = [_tool(t.name, t.description, t.input_schema) for t in request.tools]
        if request.tool_choice == "none":
            body["tool_choice"] = "none"
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return body


def completion_tokens(base_url: str | None) -> bool:
    """Whether the server is OpenAI's own API, which takes the answer limit as
    `max_completion_tokens` (its reasoning models refuse `max_tokens`)."""
    return base_url is None or OPENAI_HOST in base_url


def _tool(name: str, description: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


def _message(message: Message, caps: Capabilities, tools: bool) -> list[dict[str, Any]]:
    if message.role == "assistant":
        return [_assistant(message.parts, tools)]
    results = [p for p in message.parts if isinstance(p, ToolResult)]
    rest = [p for p in message.parts if not isinstance(p, ToolResult)]
    encoded: list[dict[str, Any]] = []
    for result in results:
        if tools:
            encoded.append(
                {"role": "tool", "tool_call_id": result.call_id, "content": _said(result)}
            )
            rest += result.images
        else:
            rest = [Text(_result_text(result)), *result.images, *rest]
    if rest:
        encoded.append({"role": "user", "content": _user_content(rest, caps)})
    return encoded


def _said(result: ToolResult) -> str:
    return f"[error] {result.content}" if result.is_error else result.content


def _result_text(result: ToolResult) -> str:
    outcome = "failed" if result.is_error else "returned"
    return f"[The tool call {result.call_id} {outcome}: {result.content}]"


def _user_content(parts: Sequence[Part], caps: Capabilities) -> str | list[dict[str, Any]]:
    items = [item for part in parts if (item := _user_part(part, caps)) is not None]
    if all(item["type"] == "text" for item in items):
        return "\n\n".join(item["text"] for item in items)
    return items


def _user_part(part: Part, caps: Capabilities) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        if not caps.images:
            return {"type": "text", "text": NO_IMAGES}
        url = f"data:{part.media_type};base64,{part.data}"
        return {"type": "image_url", "image_url": {"url": url}}
    if isinstance(part, Document):
        if not caps.documents:
            return {"type": "text", "text": NO_DOCUMENTS}
        data = f"data:{part.media_type};base64,{part.data}"
        return {"type": "file", "file": {"filename": "document.pdf", "file_data": data}}
    if isinstance(part, ToolCall):  # a call on the person's side: only its name, as text
        return {"type": "text", "text": f"[Tool call {part.name} recorded on the wrong side.]"}
    return None  # another wire's own parts


def _assistant(parts: Sequence[Part], tools: bool) -> dict[str, Any]:
    texts = [p.text for p in parts if isinstance(p, Text)]
    calls = [p for p in parts if isinstance(p, ToolCall)]
    if calls and not tools:
        texts += [f"[Called the tool {c.name} with {_arguments(c.input)}]" for c in calls]
        calls = []
    encoded: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    if calls:
        encoded["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call.input)},
            }
            for call in calls
        ]
    return encoded


def _arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True)


# --- a streamed answer ----------------------------------------------------------------------------


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class Gathered:
    """The chunks of one streamed answer, gathered: text, tool calls by index, usage."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str = ""
    model: str = ""
    id: str = ""
    usage: Usage = field(default_factory=Usage)

    def add(self, chunk: Mapping[str, Any]) -> str:
        """Take one chunk (as JSON); returns the text it adds."""
        self.model = str(chunk.get("model") or self.model)
        self.id = str(chunk.get("id") or self.id)
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = usage_of(chunk["usage"])
        added = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                added.append(delta["content"])
            for piece in delta.get("tool_calls") or []:
                self._call_piece(piece)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        self.text += added
        return "".join(added)

    def _call_piece(self, piece: Mapping[str, Any]) -> None:
        call = self.calls.setdefault(int(piece.get("index") or 0), _Call())
        call.id = str(piece.get("id") or call.id)
        function = piece.get("function") or {}
        call.name = str(function.get("name") or call.name)
        if isinstance(function.get("arguments"), str):
            call.arguments.append(function["arguments"])

    def answer(self) -> Answer:
        calls = tuple(
            ToolUseBlock(call.id or f"call_{index}", call.name, _parsed("".join(call.arguments)))
            for index, call in sorted(self.calls.items())
        )
        text = "".join(self.text)
        parts: list[Part] = [Text(text)] if text else []
        parts += [ToolCall(c.id, c.name, c.input) for c in calls]
        return Answer(
            text=text,
            calls=calls,
            message=Message("assistant", tuple(parts)),
            stop_reason=self.finish_reason or "stop",
            model=self.model,
            id=self.id,
        )


def _parsed(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments; what is not a JSON object reaches the tool as `{}` plus the raw
    text, so the tool's error result tells the model what was wrong."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {"_unparsed_arguments": arguments[:2000]}
    return value if isinstance(value, dict) else {"_unparsed_arguments": arguments[:2000]}


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """Our Usage from a Chat Completions `usage` (cached prompt tokens are counted as reads)."""
    prompt = int(raw.get("prompt_tokens") or 0)
    details = raw.get("prompt_tokens_details")
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, Mapping) else 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        cache_read_tokens=min(cached, prompt),
        output_tokens=int(raw.get("completion_tokens") or 0),
    )
