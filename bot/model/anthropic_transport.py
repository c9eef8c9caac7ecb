"""The Anthropic Messages wire's client: one streaming attempt through the official SDK, its
errors as `WireError`s, and the free key check and ping `bot doctor` and start-up use."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import anthropic

from bot.config.providers import Capabilities
from bot.model import capable, wire
from bot.model.answer import Answer
from bot.model.calls import OnText
from bot.model.retry import WireError
from bot.ports.records import Usage
from bot.ports.request import ModelRequest


def wire_error(exc: anthropic.APIError) -> WireError:
    """The SDK's error as the retry policy reads it (the body's `error.type` and message)."""
    if isinstance(exc, anthropic.APIConnectionError):
        timed_out = isinstance(exc, anthropic.APITimeoutError)
        return WireError(None, type(exc).__name__, str(exc), timed_out=timed_out)
    if not isinstance(exc, anthropic.APIStatusError):
        return WireError(-1, type(exc).__name__, str(exc))
    error = exc.body.get("error") if isinstance(exc.body, Mapping) else None
    kind = str(error.get("type", "")) if isinstance(error, Mapping) else ""
    detail = str(error.get("message", "")) if isinstance(error, Mapping) else ""
    headers = {k.lower(): v for k, v in exc.response.headers.items()}
    return WireError(exc.status_code, kind or type(exc).__name__, detail, headers)


class AnthropicTransport:
    provider = "anthropic"

    def __init__(
        self,
        api_key: str,
        base_url: str | None,
        timeout: float,
        tls: ssl.SSLContext | None,
        capabilities: Capabilities | None = None,
    ) -> None:
        # The SDK's own retries are off: ours count attempts and honour the retry budget.
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=None if tls is None else anthropic.DefaultAsyncHttpxClient(verify=tls),
        )
        self._capabilities = capabilities

    def encode(self, request: ModelRequest) -> dict[str, Any]:
        caps = self._capabilities
        return wire.encode(request if caps is None else capable.within(request, caps))

    async def stream(self, body: Mapping[str, Any], on_delta: OnText) -> tuple[Answer, Usage]:
        try:
            async with self.client.messages.stream(**body) as stream:
                async for text in stream.text_stream:
                    await on_delta(text)
                message = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise wire_error(exc) from exc
        return wire.answer_of(message), wire.usage_of(message.usage)

    async def check_key(self, model: str) -> None:
        """Counting tokens proves the key and endpoint, generating nothing."""
        try:
            await self.client.messages.count_tokens(
                model=model, messages=[{"role": "user", "content": "ping"}]
            )
        except anthropic.APIError as exc:
            raise wire_error(exc) from None

    async def ping(self, model: str) -> None:
        try:
            await self.client.messages.create(
                model=model, max_tokens=1, messages=[{"role": "user", "content": "ping"}]
            )
        except anthropic.APIError as exc:
            raise wire_error(exc) from None

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    async def aclose(self) -> None:
        await self.client.close()
