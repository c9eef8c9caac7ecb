"""One streaming model call with retries and fallbacks: the waits, the estimate charged for an
attempt that may have been billed without an answer, the `model_call` log line and span.

Every call of a turn (its rounds and a compaction's summary) goes through `Calls.call`, which
encodes the neutral request for each route's wire: the configured model first, then each
fallback in order once the first has used up its retries on an overload, a 5xx or a timeout
(never after a refusal or a key problem, which another model would not cure). Its waits use an
injectable sleep and clock.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from bot import replies, tracing
from bot.config import ModelSettings
from bot.errors import ModelError
from bot.model import rounds
from bot.model.answer import Answer
from bot.model.retry import Verdict, WireError, classify, delay_for, error_message, is_timeout
from bot.ports.records import Usage
from bot.ports.request import ModelRequest

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
OnText = Callable[[str], Awaitable[None]]
Charge = Callable[[Usage], None]
Count = Callable[[str], int]
Fit = Callable[[dict[str, Any], str], dict[str, Any]]  # a body and its wire -> the body to send


class Transport(Protocol):
    """One wire's client: encodes a neutral request and streams one attempt of it."""

    provider: str  # the wire's name in traces ("anthropic", "openai")

    def encode(self, request: ModelRequest) -> dict[str, Any]: ...

    async def stream(self, body: Mapping[str, Any], on_delta: OnText) -> tuple[Answer, Usage]:
        """The answer and its usage; raises WireError (or TimeoutError) when there is none."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Route:
    """Where a call may go: a transport, and the model's name there (None: the request's own,
    which a surface rule may have chosen); `name` is how logs and records name it."""

    transport: Transport
    model: str | None = None
    name: str = ""
    key_env: str | None = None  # the variable its key comes from (for a refused key's fix)


@dataclass(frozen=True, slots=True)
class Call:
    answer: Answer
    attempts: int
    usage: Usage
    body: Mapping[str, Any]  # the request as the answering route sent it
    model: str  # the model that answered (a fallback's, when it did)


class _CallError(ModelError):
    """A call that will not be retried (any more); `verdict` says why."""

    def __init__(self, verdict: Verdict, cause: BaseException, attempts: int, spent: float):
        super().__init__(error_message(cause))
        self.verdict = verdict
        self.cause = cause
        self.attempts = attempts
        self.spent = spent
        self.body: Mapping[str, Any] = {}
        self.streamed = False  # the reader saw part of an answer that will not finish
        self.route: Route | None = None  # the route that failed last


class Tally:
    """Passes text deltas on and keeps them, to know whether (and what) an attempt showed."""

    def __init__(self, on_text: OnText | None) -> None:
        self._on_text = on_text
        self.count = 0
        self.text: list[str] = []
        self.chars = 0
        self.first_ns = 0  # when the first delta came (time.time_ns), for the streaming span

    async def __call__(self, delta: str) -> None:
        if not self.count:
            self.first_ns = tracing.now_ns()
        self.count += 1
        self.text.append(delta)
        self.chars += len(delta)
        if self._on_text is not None:
            await self._on_text(delta)


class Calls:
    """One streaming call with retries, fallbacks, waits and a `model_call` line per answer."""

    def __init__(
        self,
        routes: Sequence[Route],
        settings: ModelSettings,
        sleep: Sleep,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self._routes = tuple(routes)
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._rng = rng

    async def call(
        self,
        request: ModelRequest,
        on_text: OnText | None,
        charge: Charge,
        count: Count,
        fit: Fit | None = None,
        **fields: Any,
    ) -> Call:
        """The first answer along the routes; `fit` adjusts each encoded body (the request's
        size). A fallback gets the same request, encoded for its own wire."""
        for index, route in enumerate(self._routes):
            routed = request if route.model is None else replace(request, model=route.model)
            body = route.transport.encode(routed)
            body = fit(body, route.transport.provider) if fit is not None else body
            try:
                return await self._traced(route, body, on_text, charge, count, fields)
            except _CallError as exc:
                exc.body = body
                exc.route = route
                if exc.verdict is not Verdict.RETRY or index + 1 == len(self._routes):
                    raise
                following = self._routes[index + 1]
                log.warning(
                    "model_fallback",
                    failed=route.name or routed.model,
                    error=str(exc),
                    next=following.name or following.model,
                    **fields,
                )
                if exc.streamed and on_text is not None:
                    await on_text(replies.ANSWER_RESTARTED)
        raise AssertionError("a Calls has at least one route")

    async def _traced(
        self,
        route: Route,
        body: Mapping[str, Any],
        on_text: OnText | None,
        charge: Charge,
        count: Count,
        fields: Mapping[str, Any],
    ) -> Call:
        """One route's answer, traced as one span. An attempt that ends without one but may have
        been billed (it timed out, was cancelled, or streamed text first) is `charge`d at once
        with an estimate (`count` over what was sent and what was streamed): the API bills it
        all the same."""
        model = str(body.get("model", self._settings.name))
        provider = route.transport.provider
        with tracing.span(
            f"chat {model}",
            gen_ai__operation__name="chat",
            gen_ai__provider__name=provider,
            gen_ai__system=provider,
            gen_ai__request__model=model,
            gen_ai__request__max_tokens=body.get("max_tokens", body.get("max_completion_tokens")),
            bot__purpose=fields.get("purpose"),
        ) as span:
            try:
                call = await self._call(route.transport, body, on_text, charge, count, fields)
            except _CallError as exc:
                span.set(error__type=type(exc.cause).__name__, bot__attempts=exc.attempts)
                span.failed(str(exc))
                raise
            usage, answer = call.usage, call.answer
            span.set(
                gen_ai__response__model=answer.model,
                gen_ai__response__id=answer.id,
                gen_ai__response__finish_reasons=[answer.stop_reason],
                # input_tokens counts every input token, cached or not (the convention's);
                # the cache reads and writes are also given apart.
                gen_ai__usage__input_tokens=rounds.total_input(usage),
                gen_ai__usage__output_tokens=usage.output_tokens,
                gen_ai__usage__cache_read__input_tokens=usage.cache_read_tokens,
                gen_ai__usage__cache_creation__input_tokens=usage.cache_write_tokens,
                bot__attempts=call.attempts,
            )
            span.text("gen_ai.output.text", answer.text)
            return call

    async def _call(
        self,
        transport: Transport,
        body: Mapping[str, Any],
        on_text: OnText | None,
        charge: Charge,
        count: Count,
        fields: Mapping[str, Any],
    ) -> Call:
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            began = self._clock()
            streamed = Tally(on_text)
            try:
                answer, usage = await self._stream(transport, body, streamed)
            except asyncio.CancelledError:
                charge(estimate(body, streamed, count))
                raise
            except (WireError, TimeoutError) as exc:
                if streamed.count or is_timeout(exc):
                    charge(estimate(body, streamed, count))
                spent = self._clock() - started
                delay = self._retry_delay(exc, attempt, spent)
                log.warning(
                    "model_call_failed",
                    error=error_message(exc),
                    attempt=attempt,
                    retry_in=None if delay is None else round(delay, 3),
                    **fields,
                )
                if delay is None:
                    error = _CallError(classify(exc), exc, attempt, spent)
                    error.streamed = bool(streamed.count)
                    raise error from exc
                if streamed.count and on_text is not None:  # the reader saw part of an answer
                    await on_text(replies.ANSWER_RESTARTED)  # that will not finish
                await self._sleep(delay)
                continue
            self._log_answer(answer, usage, attempt, self._clock() - began, fields)
            if streamed.count:
                tracing.finished_span(
                    "streaming",
                    streamed.first_ns,
                    bot__deltas=streamed.count,
                    bot__chars=streamed.chars,
                )
            model = answer.model or str(body.get("model", ""))
            return Call(answer, attempt, usage, body, model)

    def _retry_delay(self, exc: BaseException, attempt: int, spent: float) -> float | None:
        """How long to wait before the next attempt, or None when there is none."""
        if classify(exc) is not Verdict.RETRY or attempt > self._settings.max_retries:
            return None
        delay = delay_for(exc, attempt, self._rng)
        return delay if spent + delay <= self._settings.retry_budget else None

    async def _stream(
        self, transport: Transport, body: Mapping[str, Any], streamed: Tally
    ) -> tuple[Answer, Usage]:
        # The SDK's timeout bounds each read; this bounds the whole call, a trickling stream too.
        async with asyncio.timeout(self._settings.timeout):
            return await transport.stream(body, streamed)

    @staticmethod
    def _log_answer(
        answer: Answer, usage: Usage, attempt: int, latency: float, fields: Mapping[str, Any]
    ) -> None:
        log.info(
            "model_call",
            attempt=attempt,
            latency_ms=round(latency * 1000, 1),
            stop_reason=answer.stop_reason,
            model=answer.model,
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            **fields,
        )


def estimate(body: Mapping[str, Any], streamed: Tally, count: Count) -> Usage:
    """What an unfinished attempt may have cost: the request as sent and the text streamed."""
    sent = json.dumps(
        [body.get("system"), body.get("messages"), body.get("tools")], ensure_ascii=False
    )
    return Usage(input_tokens=count(sent), output_tokens=count("".join(streamed.text)))
