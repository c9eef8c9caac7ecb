"""ModelClient: the production `ModelRuntime`, over the wires the configuration names.

The host hands over a `TurnPlan`; a `ModelRun` (bot.model.turn) sends the request the plan's
`PromptBuilder` builds (streaming), runs the tools the model asks for, and returns the final text
with the turn's new history entries. Every call goes through one retry loop (`Calls`, in
bot.model.calls) over the routes: the configured model on its wire (Anthropic Messages or
OpenAI-compatible Chat Completions), then its fallbacks; or, where the turn's surface rule names
a model, that model and its fallbacks (resolved by `bot.config.models`). The `openai` SDK is
imported only when a route uses its wire. The runtime also backs the start-up key check and
`bot doctor`'s ping.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.config import ModelSettings
from bot.config.models import model_chain
from bot.config.providers import Capabilities, ProviderSettings
from bot.errors import ModelAuthError, ModelError
from bot.model.calls import Calls, Route, Sleep, Transport
from bot.model.retry import Verdict, WireError, classify, error_message
from bot.model.turn import ModelRun
from bot.ports.model import Counter, ModelRef, TurnOutcome, TurnPlan


def transport_for(
    wire: str,
    base_url: str | None,
    capabilities: Capabilities,
    api_key: str,
    timeout: float,
    tls: ssl.SSLContext | None,
) -> Transport:
    """The client for a wire at `base_url` (None: the provider's public API)."""
    if wire == "openai":
        from bot.model.openai_transport import OpenAITransport

        return OpenAITransport(api_key, base_url, timeout, tls, capabilities)
    from bot.model.anthropic_transport import AnthropicTransport

    return AnthropicTransport(api_key, base_url, timeout, tls, capabilities)


class ModelClient:
    """The production `ModelRuntime`: the configured model and its fallbacks, or the chain a
    turn's surface rule resolved (`SurfacePrompt.models`)."""

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
        providers: Mapping[str, ProviderSettings] | None = None,
        keys: Mapping[str, str] | None = None,
    ) -> None:
        """`api_key` is the configured model's; `keys` every other model's by the name of its
        variable (`[providers.NAME] api_key_env`). `tls`: the TLS client context to use
        (shared with the other HTTPS clients); None builds the SDK's own."""
        self.settings = settings
        self.counter = counter
        self.home = settings.home
        self._keys = dict(keys or {})
        self._tls = tls
        self._pool: dict[tuple[object, ...], Transport] = {}
        home, *fallbacks = model_chain(None, settings, providers or {})
        self._home_key = (home.wire, home.base_url, home.key_env)
        self._api_key = api_key
        self.transport = self._transport(home)
        # The configured model's route sends the request's own model (a test's plan may name
        # one); every other route names its model.
        first = Route(self.transport, None, home.label, home.key_env)
        self._routes = (first, *map(self._route, fallbacks))
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._clock = clock

    def _transport(self, ref: ModelRef) -> Transport:
        """One client per endpoint, key and capabilities, shared by every route that uses it."""
        place = (ref.wire, ref.base_url, ref.key_env)
        pooled = (*place, ref.images, ref.documents, ref.tools)
        if pooled not in self._pool:
            key = self._api_key if place == self._home_key else self._keys.get(ref.key_env or "")
            caps = Capabilities(images=ref.images, documents=ref.documents, tools=ref.tools)
            self._pool[pooled] = transport_for(
                ref.wire, ref.base_url, caps, key or "unused", self.settings.timeout, self._tls
            )
        return self._pool[pooled]

    def _route(self, ref: ModelRef) -> Route:
        return Route(self._transport(ref), ref.name, ref.label, ref.key_env)

    def routes(self, models: Sequence[ModelRef] = ()) -> tuple[Route, ...]:
        """Where a turn's calls go, in order: `models` (a surface rule's chain), else the
        configured model and its fallbacks."""
        return tuple(map(self._route, models)) if models else self._routes

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        models = plan.prompt.surface.models
        calls = Calls(self.routes(models), self.settings, self._sleep, self._clock, self._rng)
        window = models[0].context_window if models else self.settings.window
        return await ModelRun(calls, self.settings, self.counter, plan, window=window).run()

    async def aclose(self) -> None:
        for transport in self._pool.values():
            await transport.aclose()

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
