"""AnthropicRuntime: the production `ModelRuntime`, the Messages API through the official SDK.

The host hands over a `TurnPlan`; a `Turn` (bot.model.turn) sends the request the plan's
`PromptBuilder` builds (streaming), runs the tools the model asks for, and returns the final text
with the turn's new history entries. Every call goes through one retry loop (`Calls`, in
bot.model.calls). The runtime also backs the start-up key check and `bot doctor`'s ping.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Awaitable, Callable

import anthropic

from bot.config import ModelSettings
from bot.errors import ModelAuthError, ModelError
from bot.model.calls import Calls, Sleep
from bot.model.retry import error_message
from bot.model.turn import Turn
from bot.ports.model import Counter, TurnOutcome, TurnPlan


class AnthropicRuntime:
    """The production `ModelRuntime`: the Messages API through the official SDK."""

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
    ) -> None:
        """`tls`: the TLS client context to use (shared with the other HTTPS clients); None
        builds the SDK's own."""
        self.settings = settings
        self.counter = counter
        # The SDK's own retries are off: ours count attempts and honour the retry budget.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.timeout,
            http_client=None if tls is None else anthropic.DefaultAsyncHttpxClient(verify=tls),
        )
        self._calls = Calls(self._client, settings, sleep, clock, rng or random.Random())

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        return await Turn(self._calls, self.settings, self.counter, plan).run()

    async def aclose(self) -> None:
        await self._client.close()

    async def check_key(self) -> None:
        """A free start-up check: counting tokens proves the key and endpoint, generating
        nothing. Raises ModelAuthError on a refused key, ModelError on anything else."""
        probe = self._client.messages.count_tokens(
            model=self.settings.name, messages=[{"role": "user", "content": "ping"}]
        )
        await self._probe(probe, f"token count at {self._client.base_url} failed")

    async def ping(self) -> None:
        """One minimal call (max_tokens=1) to prove the key, the endpoint and the model work."""
        probe = self._client.messages.create(
            model=self.settings.name, max_tokens=1, messages=[{"role": "user", "content": "ping"}]
        )
        await self._probe(
            probe,
            f"model ping to {self._client.base_url} with model {self.settings.name!r} failed",
            fix="Fix: check model.name, model.base_url and the network.",
        )

    async def _probe(self, call: Awaitable[object], failed: str, fix: str = "") -> None:
        try:
            await call
        except anthropic.AuthenticationError as exc:
            raise ModelAuthError(
                f"the model API at {self._client.base_url} refused the key "
                f"({error_message(exc)}). Fix: set ANTHROPIC_API_KEY to a valid Anthropic API key "
                "(environment or .env)."
            ) from None
        except (anthropic.APIError, TimeoutError) as exc:
            raise ModelError(f"{failed} ({error_message(exc)}). {fix}".rstrip()) from None
