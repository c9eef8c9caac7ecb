"""AnthropicRuntime: one turn's model calls, tool rounds, retries and compaction.

The host hands over a `TurnPlan`; the runtime sends the assembled body as is (streaming), runs
the tools the model asks for, and returns the final text with the turn's new history entries.
Every call goes through one retry loop (`_Calls.call`) whose waits use an injectable sleep and
clock. Compaction (SPEC §4) replaces the older history with a summary when a call would reach 85%
of the context window, or once after the provider says the prompt is too long.

No poison turns (SPEC §11): every body sent is first fitted under the API's request size (images
and documents left out oldest first), and when the API refuses a request for what it carried (a
400 that is not an overflow, or a 413), the call is made again without the content it named (or
without every image and document when it named none, or for a 413), as often as that leaves out
something new. What was left out comes back on the outcome, so the host can tell the person and
keep refused content out of later replays.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anthropic
import structlog
from anthropic.types import Message

from bot import replies, tracing
from bot.config import ModelSettings
from bot.errors import BreakerTripped, ModelAuthError, ModelError, ToolError, TurnFailed
from bot.model import compaction, wire
from bot.model.retry import Verdict, classify, delay_for, error_message, refused_block
from bot.model.tooloutput import bound_tool_output
from bot.ports.model import AssembledRequest, BudgetFacts, LeftOut, TurnOutcome, TurnPlan
from bot.ports.records import Usage
from bot.ports.tools import Tool, ToolImage, ToolOutput
from bot.prompt.attachments import REQUEST_BUDGET, fit_request, media_blocks, media_id
from bot.prompt.history import entry_tokens
from bot.turns import Continuation, HistoryEntry, ToolResultBlock, ToolUseBlock

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
OnText = Callable[[str], Awaitable[None]]

ROUND_LIMIT_NOTE = (
    "(The limit of {limit} tool rounds for one answer is reached. Answer now with what you "
    "have; no more tool calls.)"
)
EMPTY_ENTRY_TEXT = "(no reply)"


class Counter(Protocol):
    """What the runtime needs of `bot.prompt.tokens.TokenCounter`."""

    def count(self, text: str) -> int: ...

    def observe(self, estimated: int, actual: int) -> None: ...


@dataclass(frozen=True, slots=True)
class _Call:
    message: Message
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


class _CompactionFailed(ModelError):
    pass


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
        self._calls = _Calls(self._client, settings, sleep, clock, rng or random.Random())

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        return await _Turn(self._calls, self.settings, self.counter, plan).run()

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


class _Tally:
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


class _Calls:
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
        count: Callable[[str], int],
        **fields: Any,
    ) -> _Call:
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
            usage, message = call.usage, call.message
            span.set(
                gen_ai__response__model=message.model,
                gen_ai__response__id=message.id,
                gen_ai__response__finish_reasons=[str(message.stop_reason)],
                # input_tokens counts every input token, cached or not (the convention's);
                # the cache reads and writes are also given apart.
                gen_ai__usage__input_tokens=wire.total_input(usage),
                gen_ai__usage__output_tokens=usage.output_tokens,
                gen_ai__usage__cache_read__input_tokens=usage.cache_read_tokens,
                gen_ai__usage__cache_creation__input_tokens=usage.cache_write_tokens,
                bot__attempts=call.attempts,
            )
            span.text("gen_ai.output.text", wire.text_of(message.content))
            return call

    async def _call(
        self,
        body: Mapping[str, Any],
        on_text: OnText | None,
        charge: Charge,
        count: Callable[[str], int],
        **fields: Any,
    ) -> _Call:
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            began = self._clock()
            streamed = _Tally(on_text)
            try:
                message = await self._stream(body, streamed)
            except asyncio.CancelledError:
                charge(_estimate(body, streamed, count))
                raise
            except (anthropic.APIError, TimeoutError) as exc:
                if streamed.count or isinstance(exc, TimeoutError | anthropic.APITimeoutError):
                    charge(_estimate(body, streamed, count))
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
            usage = wire.usage_of(message.usage)
            self._log_answer(message, usage, attempt, self._clock() - began, fields)
            if streamed.count:
                tracing.finished_span(
                    "streaming",
                    streamed.first_ns,
                    bot__deltas=streamed.count,
                    bot__chars=streamed.chars,
                )
            return _Call(message, attempt, usage)

    def _retry_delay(self, exc: BaseException, attempt: int, spent: float) -> float | None:
        """How long to wait before the next attempt, or None when there is none."""
        if classify(exc) is not Verdict.RETRY or attempt > self._settings.max_retries:
            return None
        delay = delay_for(exc, attempt, self._rng)
        return delay if spent + delay <= self._settings.retry_budget else None

    async def _stream(self, body: Mapping[str, Any], streamed: _Tally) -> Message:
        # The SDK's timeout bounds each read; this bounds the whole call, a trickling stream too.
        async with (
            asyncio.timeout(self._settings.timeout),
            self._client.messages.stream(**body) as stream,
        ):
            async for text in stream.text_stream:
                await streamed(text)
            return await stream.get_final_message()

    @staticmethod
    def _log_answer(
        message: Message, usage: Usage, attempt: int, latency: float, fields: Mapping[str, Any]
    ) -> None:
        log.info(
            "model_call",
            attempt=attempt,
            latency_ms=round(latency * 1000, 1),
            stop_reason=message.stop_reason,
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            **fields,
        )


class _Turn:
    """The state of one `run(plan)`: history, this turn's round messages, entries, usage."""

    request: AssembledRequest  # set by run(), replaced after a compaction
    summary_body: Mapping[str, Any]  # set by a successful _summarize
    summary_attempts: int
    summarized: int

    def __init__(
        self, calls: _Calls, settings: ModelSettings, counter: Counter | None, plan: TurnPlan
    ) -> None:
        self.calls = calls
        self.settings = settings
        self.counter = counter
        self.plan = plan
        self.history: list[HistoryEntry] = list(plan.history)
        self.new_history: list[HistoryEntry] | None = None
        self.rounds: list[dict[str, Any]] = []  # this turn's assistant/tool-result messages
        self.entries: list[HistoryEntry] = []
        self.usage = Usage()
        self.attempts = 0
        self.streamed: list[str] = []
        self.last_body: Mapping[str, Any] | None = None
        self.overflow_handled = False
        self.refused: dict[str, bool] = {}  # content id -> the API named it
        self.too_large: dict[str, None] = {}  # content ids left out for size, oldest first
        self.byte_budget = REQUEST_BUDGET
        self.calls_seen: dict[str, int] = {}  # identical tool calls (name + arguments) so far
        self.resent = 0  # input and output of the last call: the next call sends at least this
        self.tool_calls: list[dict[str, Any]] = []  # for the turn record: one per call
        self.suspended: list[Continuation] = []  # what the calls suspend the turn for
        self.images: dict[str, tuple[ToolImage, ...]] = {}  # by tool_use id, this round's

    async def run(self) -> TurnOutcome:
        if self.plan.compact_only:
            return await self._compact_only()
        self._assemble(self.history)
        if self.request.estimated_tokens >= compaction.THRESHOLD * self.settings.window:
            await self._compact_before_call()
        return await self._loop()

    def _assemble(self, history: Sequence[HistoryEntry]) -> None:
        with tracing.span("assembly") as span:
            assembled = self.plan.assemble(history)
            span.set(**_cache_figures(assembled))
        was_unmet = self.budget is not None and self.budget.floor_unmet
        if assembled.floor_unmet and not was_unmet:
            log.warning("floor_unmet", estimated_tokens=assembled.estimated_tokens)
        self.request = assembled

    @property
    def budget(self) -> BudgetFacts | None:
        """What the budget decided for the last request assembled (None before the first)."""
        assembled: AssembledRequest | None = getattr(self, "request", None)
        return assembled.budget if assembled is not None else None

    # --- the tool loop ---

    async def _loop(self) -> TurnOutcome:
        limit = self.settings.max_turns
        while True:
            last = limit > 0 and len(self.rounds) // 2 >= limit
            self._check_tokens()
            message = await self._turn_call(last)
            text = wire.text_of(message.content)
            calls = wire.tool_calls(message.content)
            if not calls:
                return self._finish(text)
            if last:  # the model asked for tools anyway: end honestly, without the calls
                note = replies.tool_round_limit(limit)
                return self._finish(f"{text}\n\n{note}" if text else note)
            self._check_repeats(calls, text)
            self.images = {}  # this round's only: later requests replay the results' text
            results = await self._run_tools(calls)
            self.entries += [
                self._counted(wire.assistant_entry(text, calls)),
                self._counted(wire.results_entry(results)),
            ]
            self.rounds += [
                wire.assistant_message(message.content),
                wire.results_message(results, self.images),
            ]

    # --- cost breakers (SPEC §17) ---

    def _check_tokens(self) -> None:
        """Stop before a call that would take the turn past its token cap: the next call sends
        at least what the last one read and wrote (the first, what the budget estimated)."""
        breakers = self.plan.breakers
        if breakers.max_tokens is None:
            return
        coming = self.resent if self.rounds else self.request.estimated_tokens
        spent = self.usage.total
        if spent + coming <= breakers.max_tokens:
            return
        raise self._tripped(
            "tokens",
            f"the turn would pass its token cap ({breakers.tokens_scope}: "
            f"{breakers.max_tokens} tokens; {spent} spent, the next call sends about {coming})",
        )

    def _check_repeats(self, calls: Sequence[ToolUseBlock], text: str) -> None:
        """Stop before running a tool call that was already made `repeats` times, same name and
        same arguments: a model that loops would otherwise spend until a cap."""
        allowed = self.plan.breakers.repeats
        if allowed is None:
            return
        keys = [_call_key(call) for call in calls]
        for call, key in zip(calls, keys, strict=True):
            if self.calls_seen.get(key, 0) + keys.count(key) > allowed:
                raise self._tripped(
                    "repeat",
                    f"the model asked for tool {call.name!r} with the same arguments more than "
                    f"{allowed} times",
                )
        for key in keys:
            self.calls_seen[key] = self.calls_seen.get(key, 0) + 1

    def _tripped(self, breaker: str, why: str) -> BreakerTripped:
        scope = self.plan.breakers.tokens_scope
        log.warning("breaker_tripped", breaker=breaker, scope=scope, tokens=self.usage.total)
        return BreakerTripped(
            f"stopped by a cost breaker: {why}.",
            breaker=breaker,
            scope=scope,
            partial_text="".join(self.streamed),
            entries=tuple(self.entries),
            reply=replies.turn_stopped(breaker, self.plan.breakers.max_tokens),
            attempts=self.attempts,
            request=self.last_body,
            usage=self.usage,
            budget=self.budget,
            tool_calls=tuple(self.tool_calls),
        )

    def _finish(self, text: str) -> TurnOutcome:
        self.entries.append(self._counted(wire.assistant_entry(text or EMPTY_ENTRY_TEXT)))
        return TurnOutcome(
            text=text,
            entries=tuple(self.entries),
            history=self.new_history,
            request=self.last_body,
            usage=self.usage,
            attempts=self.attempts,
            budget=self.budget,
            left_out=self._left_out(answered=True),
            tool_calls=tuple(self.tool_calls),
            suspended=tuple(self.suspended),
        )

    def _left_out(self, *, answered: bool) -> tuple[LeftOut, ...]:
        """What the calls went without. Refused content the API did not name counts only when
        the turn was answered without it: a failure then says it was not the cause."""
        refused = [
            LeftOut(content_id, refused=True)
            for content_id, named in self.refused.items()
            if named or answered
        ]
        sized = [LeftOut(c, refused=False) for c in self.too_large if c not in self.refused]
        return (*refused, *sized) if answered else tuple(refused)

    def _body(self, last: bool) -> dict[str, Any]:
        body = {k: v for k, v in self.request.body.items() if k != "stream"}
        rounds = list(self.rounds)
        if last and rounds:
            if body.get("tools"):
                body["tool_choice"] = {"type": "none"}
            note = {"type": "text", "text": ROUND_LIMIT_NOTE.format(limit=self.settings.max_turns)}
            rounds[-1] = {**rounds[-1], "content": [*rounds[-1]["content"], note]}
        fitted = fit_request(wire.extend_messages(body, rounds), self.refused, self.byte_budget)
        for content_id in fitted.left_out:
            if content_id not in self.too_large:
                self.too_large[content_id] = None
                log.warning("attachment_left_out", reason="request_size", turn_id=self.plan.turn_id)
        return fitted.body

    async def _turn_call(self, last: bool) -> Message:
        while True:
            try:
                return await self._send(self._body(last))
            except _CallError as error:
                if error.verdict is Verdict.REFUSED and self._leave_out(error):
                    continue
                if error.verdict is not Verdict.OVERFLOW or self.overflow_handled:
                    raise self._failed(error) from None
                self.overflow_handled = True
                await self._compact_after_overflow(error)

    def _leave_out(self, error: _CallError) -> bool:
        """Leave out what a refused request carried, for the next try: the block the API named,
        else every image and document (for a 413, by size). False when nothing is left to try."""
        found = list(media_blocks(self.last_body or {}))
        if not found:
            return False
        cause = error.cause
        if isinstance(cause, anthropic.APIStatusError) and cause.status_code == 413:
            if self.byte_budget == 0:
                return False
            self.byte_budget = 0  # the size was misjudged: this turn goes without any media
            log.warning("model_request_too_large", files=len(found), turn_id=self.plan.turn_id)
            return True
        place = refused_block(cause)
        named = [block for m, b, block in found if (m, b) == place]
        for block in named or [block for _, _, block in found]:
            self.refused.setdefault(media_id(block), bool(named))
        log.warning(
            "model_refused_content",
            named=bool(named),
            files=len(named or found),
            error=str(error),
            turn_id=self.plan.turn_id,
        )
        return True

    async def _send(self, body: dict[str, Any]) -> Message:
        self.last_body = body
        first_of_request = not self.rounds
        call = await self.calls.call(
            body,
            self._on_text,
            self._charged,
            self._count,
            purpose="turn",
            round=len(self.rounds) // 2,
            turn_id=self.plan.turn_id,
        )
        self.usage += call.usage
        self.attempts = call.attempts
        self.resent = wire.total_input(call.usage) + call.usage.output_tokens
        if first_of_request and self.counter is not None:
            # The estimate covers the assembled request only, so only its first call teaches.
            self.counter.observe(self.request.estimated_tokens, wire.total_input(call.usage))
        return call.message

    def _charged(self, usage: Usage) -> None:
        """An attempt that failed after it may have been billed: counted in the turn's usage
        and told to the host at once (a cancelled turn returns nothing else)."""
        log.info("model_call_charged", estimated_tokens=usage.total, turn_id=self.plan.turn_id)
        self.usage += usage
        if self.plan.on_charge is not None:
            self.plan.on_charge(usage)

    def _count(self, text: str) -> int:
        return self.counter.count(text) if self.counter is not None else len(text) // 4 + 1

    def _counted(self, entry: HistoryEntry) -> HistoryEntry:
        """The entry with its token estimate cached, so history is never re-tokenized."""
        if self.counter is None:
            return entry
        return replace(entry, tokens=entry_tokens(entry, self.counter.count))

    async def _on_text(self, delta: str) -> None:
        self.streamed.append(delta)
        if self.plan.on_text is not None:
            await self.plan.on_text(delta)

    async def _run_tools(self, calls: Sequence[ToolUseBlock]) -> list[ToolResultBlock]:
        tools = {tool.spec.name: tool for tool in self.plan.tools}
        return [await self._run_tool(call, tools.get(call.name), tools) for call in calls]

    async def _run_tool(
        self, call: ToolUseBlock, tool: Tool | None, tools: Mapping[str, Tool]
    ) -> ToolResultBlock:
        began = time.monotonic()
        marked: ToolOutput | None = None  # a result that says more than ok
        with tracing.span(
            f"execute_tool {call.name}",
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name=call.name,
            gen_ai__tool__call__id=call.id,
        ) as span:
            if tool is None:  # not offered here (or invented): it reaches no server
                known = ", ".join(sorted(tools)) or "none"
                output, failed = f"unknown tool {call.name!r}; the tools here are: {known}", True
                log.warning("tool_refused", tool=call.name, turn_id=self.plan.turn_id)
            else:
                try:
                    returned = await tool(call.input)
                    if isinstance(returned, ToolOutput):
                        output, failed = returned.text, False
                        self.images[call.id] = returned.images
                        marked = returned
                    else:
                        output, failed = str(returned), False
                except ToolError as exc:
                    output, failed = str(exc) or type(exc).__name__, True
                except Exception as exc:  # any tool bug becomes an error result, not a lost turn
                    output, failed = f"the tool failed: {type(exc).__name__}: {exc}", True
            content = bound_tool_output(output)
            size = len(content.encode("utf-8", errors="replace"))
            span.set(bot__ok=not failed, bot__result_bytes=size)
            if failed:
                span.failed("the tool call failed")
        latency_ms = round((time.monotonic() - began) * 1000, 1)
        log.info(
            "tool_call",
            tool=call.name,
            ok=not failed,
            result_bytes=size,
            latency_ms=latency_ms,
            turn_id=self.plan.turn_id,
        )
        outcome = "refused" if tool is None else "error" if failed else "ok"
        if marked is not None and marked.outcome is not None and not failed:
            outcome = marked.outcome
        if marked is not None and marked.suspends is not None and not failed:
            self.suspended.append(marked.suspends)
        self.tool_calls.append(
            {
                "tool": call.name,
                "arguments": call.input,
                "result_bytes": size,
                "duration_ms": latency_ms,
                "outcome": outcome,
                **(dict(marked.facts) if marked is not None else {}),
            }
        )
        return ToolResultBlock(call.id, content, is_error=failed)

    def _failed(self, error: _CallError) -> TurnFailed:
        verdict = error.verdict
        reply = (
            replies.MODEL_MISCONFIGURED
            if verdict in {Verdict.AUTH, Verdict.DENIED}
            else replies.MODEL_UNAVAILABLE
        )
        return TurnFailed(
            _failure_message(error, self.settings),
            partial_text="".join(self.streamed),
            entries=tuple(self.entries),
            reply=reply,
            attempts=error.attempts,
            request=self.last_body,
            usage=self.usage,
            budget=self.budget,
            left_out=self._left_out(answered=False),
            tool_calls=tuple(self.tool_calls),
        )

    # --- compaction ---

    async def _compact_before_call(self) -> None:
        try:
            history = await self._summarize("threshold")
        except _CompactionFailed as exc:
            log.warning("compaction_failed", reason="threshold", error=str(exc), going_on=True)
            return
        if history is not None:
            self._assemble(history)

    async def _compact_after_overflow(self, error: _CallError) -> None:
        try:
            history = await self._summarize("overflow")
        except _CompactionFailed as exc:
            raise TurnFailed(
                f"the request is over the model's context window ({error}) and compacting the "
                f"history failed ({exc}).",
                partial_text="".join(self.streamed),
                entries=tuple(self.entries),
                reply=replies.MODEL_UNAVAILABLE,
                attempts=error.attempts,
                request=self.last_body,
                usage=self.usage,
                budget=self.budget,
            ) from None
        if history is None:
            raise self._failed(error)
        self._assemble(history)

    async def _summarize(self, reason: str) -> list[HistoryEntry] | None:
        """Replace the older history by a summary; None when there is nothing older to replace."""
        cut = compaction.split_point(self.history)
        if cut == 0:
            log.info("compaction_skipped", reason=reason, messages=len(self.history))
            return None
        older, tail = self.history[:cut], self.history[cut:]
        s = self.settings
        # The turn's own model (a surface rule may choose one), so its price and window apply.
        assembled: AssembledRequest | None = getattr(self, "request", None)
        model = str(assembled.body.get("model") or s.name) if assembled else s.name
        body = compaction.summary_body(model, s.max_tokens, older, s.window)
        try:
            call = await self.calls.call(
                body, None, self._charged, self._count, purpose="summary", turn_id=self.plan.turn_id
            )
        except _CallError as exc:
            raise _CompactionFailed(f"the summary call failed: {exc}") from exc
        self.usage += call.usage
        text = wire.text_of(call.message.content).strip()
        if not text:
            raise _CompactionFailed("the summary call returned no text")
        self.history = [self._counted(compaction.summary_entry(text)), *tail]
        self.new_history = self.history
        self.summary_body, self.summary_attempts, self.summarized = body, call.attempts, cut
        log.info("compaction", reason=reason, summarized=len(older), kept=len(tail))
        return self.history

    async def _compact_only(self) -> TurnOutcome:
        try:
            history = await self._summarize("command")
        except _CompactionFailed as exc:
            raise TurnFailed(
                f"/compact failed: {exc}", reply=replies.COMPACT_FAILED, usage=self.usage
            ) from None
        if history is None:
            kept = len(self.history)
            text = replies.nothing_older_to_compact(kept)
            return TurnOutcome(text=text, entries=(), usage=self.usage, attempts=0)
        text = replies.compacted(self.summarized, len(history) - 1)
        return TurnOutcome(
            text=text,
            entries=(),
            history=history,
            request=self.summary_body,
            usage=self.usage,
            attempts=self.summary_attempts,
        )


Charge = Callable[[Usage], None]


def _estimate(body: Mapping[str, Any], streamed: _Tally, count: Callable[[str], int]) -> Usage:
    """What an unfinished attempt may have cost: the request as sent and the text streamed."""
    sent = json.dumps(
        [body.get("system"), body.get("messages"), body.get("tools")], ensure_ascii=False
    )
    return Usage(input_tokens=count(sent), output_tokens=count("".join(streamed.text)))


def _cache_figures(assembled: AssembledRequest) -> dict[str, int | str | bool]:
    """What the assembly span says of the request: its size and its cache breakpoints."""
    body = assembled.body
    ttls = sorted({str(mark.get("ttl", "5m")) for mark in wire.cache_marks(body)})
    return {
        "bot.prompt.estimated_tokens": assembled.estimated_tokens,
        "bot.prompt.history_used": assembled.history_used,
        "bot.prompt.floor_unmet": assembled.floor_unmet,
        "bot.cache.breakpoints": wire.count_breakpoints(body),
        "bot.cache.ttl": ",".join(ttls) or "none",
    }


def _call_key(call: ToolUseBlock) -> str:
    """A tool call's identity for the repeat breaker: its name and its arguments, canonical."""
    arguments = json.dumps(call.input, sort_keys=True, ensure_ascii=False, default=str)
    return f"{call.name}\x00{arguments}"


def _failure_message(error: _CallError, settings: ModelSettings) -> str:
    verdict = error.verdict
    if verdict is Verdict.RETRY:
        return (
            f"the model API kept failing ({error}) after {error.attempts} attempts in "
            f"{error.spent:.1f}s; gave up (model.max_retries = {settings.max_retries}, "
            f"model.retry_budget = {settings.retry_budget:g}s)."
        )
    if verdict is Verdict.AUTH:
        return (
            f"the model API refused the API key ({error}). Fix: set ANTHROPIC_API_KEY to a valid "
            "Anthropic API key (environment or .env) and restart."
        )
    if verdict is Verdict.DENIED:
        return (
            f"the model API denied access ({error}). Fix: check that the key in "
            f"ANTHROPIC_API_KEY may use model {settings.name!r}."
        )
    if verdict is Verdict.OVERFLOW:
        return (
            f"the request is over the model's context window even after compacting ({error}). "
            "Fix: set model.context_window to the model's real window, or shrink the skills."
        )
    return f"the model API refused the request ({error}); not retried."
