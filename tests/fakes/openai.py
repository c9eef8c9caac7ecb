"""A fake OpenAI-compatible Chat Completions server on loopback, driven by the real `openai` SDK.

`POST /v1/chat/completions` answers as JSON or, with `"stream": true`, as SSE (`data: {chunk}`
lines, then `data: [DONE]`): text deltas word by word, tool calls in pieces (the index, id and
function name first, the JSON arguments in fragments), the finish reason, and, with
`stream_options.include_usage`, a last chunk with no choices that carries the usage. `GET
/v1/models` lists the models. Errors have OpenAI's shape (`{"error": {"message", "type",
"code"}}`): scripted 429 (with `retry-after`), 500 or 400, 401 for a wrong key, and 400
`context_length_exceeded` past `context_window`.

Usage models OpenAI's automatic prefix caching: the cached prompt tokens are the longest
byte-identical prefix this request shares with an earlier one, counted in 128-token steps from a
1,024-token minimum (`prompt_tokens_details.cached_tokens`). Tokens are counted with o200k_base
over the messages and tools as JSON; an image counts a fixed `IMAGE_TOKENS`.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.prompt.tokens import load_encoding
from tests.fakes.anthropic import Reply, Scripted, ToolCall

__all__ = ["FakeOpenAI", "Reply", "ToolCall"]

CACHE_MIN_TOKENS = 1024
CACHE_STEP = 128
IMAGE_TOKENS = 255
OVERFLOW_CODE = "context_length_exceeded"
_DATA_URL = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests"}


def count_tokens(text: str) -> int:
    return len(load_encoding("o200k_base").encode(text, disallowed_special=()))


def prompt_text(body: Mapping[str, Any]) -> tuple[str, int]:
    """What the prompt is for counting and caching (media by digest), and its image count."""
    raw = json.dumps([body.get("messages"), body.get("tools")], ensure_ascii=False)
    images = 0

    def digest(found: re.Match[str]) -> str:
        nonlocal images
        images += 1
        return "[image " + hashlib.sha256(found.group(0).encode()).hexdigest()[:16] + "]"

    return _DATA_URL.sub(digest, raw), images


@dataclass(frozen=True)
class _Failure:
    status: int
    message: str
    code: str | None
    retry_after: float | None


class FakeOpenAI:
    """The fake server; `async with FakeOpenAI() as fake:` then `base_url` (ends in /v1)."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: tuple[str, ...] = ("gpt-5-mini", "qwen3-32b"),
        context_window: int | None = None,
    ) -> None:
        self.api_key = api_key
        self.models = models
        self.context_window = context_window
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, Any]] = []
        self._prompts: list[str] = []  # what earlier requests cached (their prompt text)
        self._script: deque[Scripted] = deque()
        self._responder: Callable[[dict[str, Any]], Reply | str | None] | None = None
        self._failures: deque[_Failure] = deque()
        self._ids = itertools.count(1)
        self._midway: asyncio.Event | None = None  # set by hold_midway(): see there
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def __aenter__(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- test controls ---

    def script(self, *replies: Scripted) -> None:
        self._script.extend(replies)

    def hold_midway(self) -> None:
        """Streamed answers stop after their first text chunk until `release_midway()`: a test can
        see an answer being streamed before it ends, without a clock."""
        self._midway = asyncio.Event()

    def release_midway(self) -> None:
        midway, self._midway = self._midway, None
        if midway is not None:
            midway.set()

    def respond_with(self, responder: Callable[[dict[str, Any]], Reply | str | None]) -> None:
        self._responder = responder

    def fail(
        self,
        status: int,
        times: int = 1,
        retry_after: float | None = None,
        message: str = "",
        code: str | None = None,
    ) -> None:
        failure = _Failure(status, message or f"fake failure {status}", code, retry_after)
        self._failures.extend([failure] * times)

    # --- handlers ---

    async def _models(self, request: web.Request) -> web.Response:
        denied = self._check_auth(request)
        if denied is not None:
            return denied
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        denied = self._check_auth(request)
        body = await request.json()
        self.requests.append(body)
        if denied is not None:
            return denied
        if self._failures:
            failure = self._failures.popleft()
            return _error(failure.status, failure.message, failure.code, failure.retry_after)
        text, images = prompt_text(body)
        prompt = count_tokens(text) + images * IMAGE_TOKENS
        if self.context_window is not None and prompt > self.context_window:
            message = (
                f"This model's maximum context length is {self.context_window} tokens. However, "
                f"your messages resulted in {prompt} tokens."
            )
            return _error(400, message, OVERFLOW_CODE, None)
        reply = self._next_reply(body)
        usage = self._usage(text, prompt, reply)
        self.usages.append(usage)
        if body.get("stream"):
            return await self._stream(request, body, reply, usage)
        return web.json_response(self._completion(body, reply, usage))

    def _check_auth(self, request: web.Request) -> web.Response | None:
        bearer = request.headers.get("authorization", "")
        key = bearer[7:].strip() if bearer.lower().startswith("bearer ") else ""
        if not key or (self.api_key is not None and key != self.api_key):
            return _error(401, "Incorrect API key provided.", "invalid_api_key", None)
        return None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._script:
            scripted = self._script.popleft()
            made = scripted(body) if callable(scripted) else scripted
            return Reply(text=made) if isinstance(made, str) else made
        answer = self._responder(body) if self._responder is not None else None
        if answer is None:
            return Reply(text="Answer to: " + _last_user_text(body)[:40])
        return Reply(text=answer) if isinstance(answer, str) else answer

    def _usage(self, text: str, prompt: int, reply: Reply) -> dict[str, Any]:
        shared = max((_common_prefix(text, earlier) for earlier in self._prompts), default=0)
        self._prompts.append(text)
        prefix = count_tokens(text[:shared]) if shared else 0
        cached = 0 if prefix < CACHE_MIN_TOKENS else min(prefix // CACHE_STEP * CACHE_STEP, prompt)
        completion = count_tokens(reply.text) + 20 * len(reply.tool_calls)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or f"call_{next(self._ids)}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.input)},
            }
            for call in reply.tool_calls
        ]

    def _completion(
        self, body: Mapping[str, Any], reply: Reply, usage: Mapping[str, Any]
    ) -> dict[str, Any]:
        calls = self._calls(reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {"index": 0, "message": message, "finish_reason": _finish(calls)},
            ],
            "usage": usage,
        }

    async def _stream(
        self, request: web.Request, body: Mapping[str, Any], reply: Reply, usage: Mapping[str, Any]
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        head = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", ""),
        }

        async def send(choices: list[dict[str, Any]], **more: Any) -> None:
            chunk = {**head, "choices": choices, **more}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        for n, word in enumerate(re.findall(r"\S+\s*|\s+", reply.text)):
            await send([{"index": 0, "delta": {"content": word}}])
            if n == 0 and self._midway is not None:
                await self._midway.wait()
        calls = self._calls(reply)
        for index, call in enumerate(calls):
            opening = {"index": index, "id": call["id"], "type": "function"}
            opening["function"] = {"name": call["function"]["name"], "arguments": ""}
            await send([{"index": 0, "delta": {"tool_calls": [opening]}}])
            arguments = call["function"]["arguments"]
            for start in range(0, len(arguments), 7):  # fragments, as models stream them
                piece = {"index": index, "function": {"arguments": arguments[start : start + 7]}}
                await send([{"index": 0, "delta": {"tool_calls": [piece]}}])
        await send([{"index": 0, "delta": {}, "finish_reason": _finish(calls)}])
        if (body.get("stream_options") or {}).get("include_usage"):
            await send([], usage=usage)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _finish(calls: list[dict[str, Any]]) -> str:
    return "tool_calls" if calls else "stop"


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (by bisection: each comparison runs in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content or [] if p.get("type") == "text")
    return ""


def _error(status: int, message: str, code: str | None, retry_after: float | None) -> web.Response:
    error = {"message": message, "type": _ERROR_TYPES.get(status, "server_error"), "code": code}
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return web.json_response({"error": error}, status=status, headers=headers)
