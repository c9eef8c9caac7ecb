"""ModelClient: the production `ModelRuntime`, over the wires the configuration names.

The host hands over a `TurnPlan`; a `ModelRun` (bot.model.turn) sends the request the plan's
`PromptBuilder` builds (streaming), runs the tools the model asks for, and returns the final text
with the turn's new history entries. Every call goes through one retry loop (`Calls`, in
bot.model.calls) over the routes: the configured model on its wire (Anthropic Messages or
OpenAI-compatible Chat Completions), then its fallbacks. The `openai` SDK is imported only when
a route uses its wire. The runtime also backs the start-up key check and `bot doctor`'s ping.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

from bot.config import ModelSettings
from bot.config.providers import Endpoint
from bot.errors import ModelAuthError, ModelError
from bot.model.calls import Calls, Route, Sleep, Transport
from bot.model.retry import Verdict, WireError, classify, error_message
from bot.model.turn import ModelRun
from bot.ports.model import Counter, TurnOutcome, TurnPlan


def transport_for(
    endpoint: Endpoint, api_key: str, timeout: float, tls: ssl.SSLContext | None
) -> Transport:
    """The client for the endpoint's wire."""
    if endpoint.wire == "openai":
        from bot.model.openai_transport import OpenAITransport

        return OpenAITransport(api_key, endpoint.base_url, timeout, tls, endpoint.capabilities)
    from bot.model.anthropic_transport import AnthropicTransport

    return AnthropicTransport(api_key, endpoint.base_url, timeout, tls)


class ModelClient:
    """The production `ModelRuntime`: the configured model and its fallbacks."""

    def __init__(
        self,
        settings: ModelSettings,
        api_key: str,
        counter: Counter | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        tls: ssl.SSLContext | None = None,
        fallbacks: Sequence[tuple[Endpoint, str]] = (),
    ) -> None:
        """`api_key` is the configured model's; `fallbacks` each endpoint with its key.
        `tls`: the TLS client context to use (shared with the other HTTPS clients); None
        builds the SDK's own."""
        self.settings = settings
        self.counter = counter
        self.home = settings.home
        self.transport = transport_for(self.home, api_key, settings.timeout, tls)
        routes = [Route(self.transport, None, self.home.provider)]
        for endpoint, key in fallbacks:
            transport = transport_for(endpoint, key, settings.timeout, tls)
            routes.append(Route(transport, endpoint.model, endpoint.label))
        self._routes = routes
        self._calls = Calls(routes, settings, sleep, clock, rng or random.Random())

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        return await ModelRun(self._calls, self.settings, self.counter, plan).run()

    async def aclose(self) -> None:
        for route in self._routes:
            await route.transport.aclose()

    async def check_key(self) -> None:
        """A free start-up check (a token count, or the model list): proves the key and
        endpoint. Raises ModelAuthError on a refused key, ModelError on anything else."""
        probe: Any = self.transport
        what = "token count" if self.home.wire == "anthropic" else "model list"
        await self._probe(probe.check_key(self.settings.name), f"{what} at {probe.base_url} failed")

    async def ping(self) -> None:
        """One minimal call (max_tokens=1) to prove the key, the endpoint and the model work."""
        probe: Any = self.transport
        await self._probe(
            probe.ping(self.settings.name),
            f"model ping to {probe.base_url} with model {self.settings.name!r} failed",
            fix="Fix: check model.name, model.base_url and the network.",
        )

    async def _probe(self, call: Any, failed: str, fix: str = "") -> None:
        probe: Any = self.transport
        where = probe.base_url
        try:
            await call
        except (WireError, TimeoutError) as exc:
            if classify(exc) is Verdict.AUTH:
                key = self.home.key_env or "the API key"
                raise ModelAuthError(
                    f"the model API at {where} refused the key ({error_message(exc)}). Fix: set "
                    f"{key} to a valid {self.home.provider} API key (environment or .env)."
                ) from None
            raise ModelError(f"{failed} ({error_message(exc)}). {fix}".rstrip()) from None
