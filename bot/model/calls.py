"""One streaming Messages API call with retries: the waits, the estimate charged for an
attempt that may have been billed without an answer, the `model_call` log line and span.

Every call of a turn (its rounds and a compaction's summary) goes through `Calls.call`; its waits
use an injectable sleep and clock.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import structlog

from bot import replies, tracing
from bot.config import ModelSettings
from bot.errors import ModelError
from bot.model import rounds, wire
from bot.model.answer import Answer
from bot.model.retry import Verdict, classify, delay_for, error_message
from bot.ports.records import Usage

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
OnText = Callable[[str], Awaitable[None]]
Charge = Callable[[Usage], None]
Count = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Call:
    answer: Answer
    attempts: int
    usage: Usage


class _CallError(ModelError):
    """A call that will not be retried (any more); `verdict` says why."""

    def __init__(self, verdict: Verdict, cause: BaseException, attempts: int, spent: float):
        super().__init__(error_message(cause))
        self.verdict = verdict
        self.cause = cause
        self.attempts = attempts
        self.spent = spent


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
    """One streaming Messages call with retries, waits and a `model_call` log line per answer."""

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        settings: ModelSettings,
        sleep: Sleep,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self._client = client
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self._rng = rng

    async def call(
        self,
        body: Mapping[str, Any],
        on_text: OnText | None,
        charge: Charge,
        count: Count,
        **fields: Any,
    ) -> Call:
        """The call's answer, traced as one span. An attempt that ends without one but may have
        been billed (it timed out, was cancelled, or streamed text first) is `charge`d at once
        with an estimate (`count` over what was sent and what was streamed): the API bills it
        all the same."""
        model = str(body.get("model", self._settings.name))
        with tracing.span(
            f"chat {model}",
            gen_ai__operation__name="chat",
            gen_ai__provider__name="anthropic",
            gen_ai__system="anthropic",
            gen_ai__request__model=model,
            gen_ai__request__max_tokens=body.get("max_tokens"),
            bot__purpose=fields.get("purpose"),
        ) as span:
            try:
                call = await self._call(body, on_text, charge, count, **fields)
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
        body: Mapping[str, Any],
        on_text: OnText | None,
        charge: Charge,
        count: Count,
        **fields: Any,
    ) -> Call:
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            began = self._clock()
            streamed = Tally(on_text)
            try:
                answer, usage = await self._stream(body, streamed)
            except asyncio.CancelledError:
                charge(estimate(body, streamed, count))
                raise
            except (anthropic.APIError, TimeoutError) as exc:
                if streamed.count or isinstance(exc, TimeoutError | anthropic.APITimeoutError):
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
                    raise _CallError(classify(exc), exc, attempt, spent) from exc
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
            return Call(answer, attempt, usage)

    def _retry_delay(self, exc: BaseException, attempt: int, spent: float) -> float | None:
        """How long to wait before the next attempt, or None when there is none."""
        if classify(exc) is not Verdict.RETRY or attempt > self._settings.max_retries:
            return None
        delay = delay_for(exc, attempt, self._rng)
        return delay if spent + delay <= self._settings.retry_budget else None

    async def _stream(self, body: Mapping[str, Any], streamed: Tally) -> tuple[Answer, Usage]:
        # The SDK's timeout bounds each read; this bounds the whole call, a trickling stream too.
        async with (
            asyncio.timeout(self._settings.timeout),
            self._client.messages.stream(**body) as stream,
        ):
            async for text in stream.text_stream:
                await streamed(text)
            message = await stream.get_final_message()
            return wire.answer_of(message), wire.usage_of(message.usage)

    @staticmethod
    def _log_answer(
        answer: Answer, usage: Usage, attempt: int, latency: float, fields: Mapping[str, Any]
    ) -> None:
        log.info(
            "model_call",
            attempt=attempt,
            latency_ms=round(latency * 1000, 1),
            stop_reason=answer.stop_reason,
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
