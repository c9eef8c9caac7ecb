"""The OpenAI-compatible Chat Completions wire's client: one streamed attempt through the
official `openai` SDK (text and tool-call deltas), its errors as `WireError`s, and the key check
(the model list) and ping. Imported only when a configured model is on this wire (`import
openai` takes a while)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import openai

from bot.config.providers import Capabilities
from bot.model import openai_wire
from bot.model.answer import Answer
from bot.model.calls import OnText
from bot.model.retry import WireError
from bot.ports.records import Usage
from bot.ports.request import ModelRequest


def wire_error(exc: openai.APIError) -> WireError:
    """The SDK's error as the retry policy reads it (the error object's code or type)."""
    if isinstance(exc, openai.APIConnectionError):
        timed_out = isinstance(exc, openai.APITimeoutError)
        return WireError(None, type(exc).__name__, str(exc), timed_out=timed_out)
    body = exc.body if isinstance(exc.body, Mapping) else {}
    kind = str(body.get("code") or body.get("type") or type(exc).__name__)
    detail = str(body.get("message") or exc.message)
    if not isinstance(exc, openai.APIStatusError):
        return WireError(200, kind, detail)  # an error event in the middle of a stream
    headers = {k.lower(): v for k, v in exc.response.headers.items()}
    return WireError(exc.status_code, kind, detail, headers)


class OpenAITransport:
    provider = "openai"

    def __init__(
        self,
        api_key: str,
        base_url: str | None,
        timeout: float,
        tls: ssl.SSLContext | None,
        capabilities: Capabilities,
    ) -> None:
        # The SDK's own retries are off: ours count attempts and honour the retry budget.
        self.client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=None if tls is None else openai.DefaultAsyncHttpxClient(verify=tls),
        )
        self._capabilities = capabilities
        self._completion_tokens = openai_wire.completion_tokens(base_url)

    def encode(self, request: ModelRequest) -> dict[str, Any]:
        return openai_wire.encode(
            request, self._capabilities, completion_tokens=self._completion_tokens
        )

    async def stream(self, body: Mapping[str, Any], on_delta: OnText) -> tuple[Answer, Usage]:
        gathered = openai_wire.Gathered()
        try:
            stream = await self.client.chat.completions.create(**body)
            async with stream:
                async for chunk in stream:
                    text = gathered.add(chunk.model_dump(mode="json", exclude_none=True))
                    if text:
                        await on_delta(text)
        except openai.APIError as exc:
            raise wire_error(exc) from exc
        return gathered.answer(), gathered.usage

    async def models(self) -> list[str]:
        """The model ids the server lists (GET /models)."""
        try:
            page = await self.client.models.list()
        except openai.APIError as exc:
            raise wire_error(exc) from None
        return [model.id for model in page.data]

    async def check_key(self, model: str) -> None:
        await self.models()

    async def ping(self, model: str) -> None:
        body = self.encode(ModelRequest(model=model, max_tokens=1, sections=(), messages=()))
        body["messages"] = [{"role": "user", "content": "ping"}]
        await self.stream(body, _ignore)

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    async def aclose(self) -> None:
        await self.client.close()


async def _ignore(text: str) -> None:
    return None
