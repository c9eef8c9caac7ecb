"""One turn's run through the model: the tool loop over its rounds, compaction before a call
that would fill the window (or once after an overflow), and what the turn returns or raises.

The request is built by the plan's `PromptBuilder` (again after a compaction); each call goes
through `Calls`, is fitted by `Omissions` and checked by the cost breakers first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from bot import replies, tracing
from bot.config import ModelSettings
from bot.errors import BreakerTripped, TurnFailed, TurnSpend
from bot.model import compaction, rounds
from bot.model.answer import Answer
from bot.model.breakers import RepeatGuard, over_token_cap
from bot.model.calls import Calls, _CallError
from bot.model.failures import failure_message, failure_reply
from bot.model.meter import Meter
from bot.model.omissions import Omissions
from bot.model.retry import Verdict, is_timeout
from bot.model.summary import Summary, _CompactionFailed, summarize
from bot.model.toolrun import run_tools
from bot.ports.model import AssembledRequest, BudgetFacts, Counter, TurnOutcome, TurnPlan
from bot.ports.request import Message, ModelRequest, Part
from bot.prompt.history import entry_tokens
from bot.turns import Continuation, HistoryEntry

log = structlog.get_logger(__name__)

EMPTY_ENTRY_TEXT = "(no reply)"


class ModelRun:
    """The state of one `run(plan)`: history, this turn's round messages, entries, spend."""

    def __init__(
        self,
        calls: Calls,
        settings: ModelSettings,
        counter: Counter | None,
        plan: TurnPlan,
        *,
        window: int | None = None,
    ) -> None:
        self.calls = calls
        self.settings = settings
        self.window = settings.window if window is None else window  # the turn's model's
        self.plan = plan
        self.meter = Meter(counter, plan.on_charge, plan.turn_id)
        self.omissions = Omissions(plan.turn_id)
        self.repeats = RepeatGuard(plan.breakers.repeats)
        self.request: AssembledRequest | None = None  # the last assembled (after a compaction)
        self.history: list[HistoryEntry] = list(plan.history)
        self.new_history: list[HistoryEntry] | None = None
        self.rounds: list[Message] = []  # this turn's assistant/tool-result messages
        self.entries: list[HistoryEntry] = []
        self.attempts = 0
        self.streamed: list[str] = []
        self.last_body: Mapping[str, Any] | None = None
        self.overflow_handled = False
        self.compacted_between = False  # the history was compacted between rounds (once)
        self.resent = 0  # input and output of the last call: the next call sends at least this
        self.tool_calls: list[dict[str, Any]] = []  # for the turn record: one per call
        self.suspended: list[Continuation] = []  # what the calls suspend the turn for
        self.opening: list[Part] = []  # parts steered into the first call

    async def run(self) -> TurnOutcome:
        if self.plan.compact_only:
            return await self._compact_only()
        request = self._assemble(self.history)
        if request.estimated_tokens >= compaction.THRESHOLD * self.window:
            await self._compact_before_call()
        return await self._loop()

    def _assemble(self, history: Sequence[HistoryEntry]) -> AssembledRequest:
        with tracing.span("assembly") as span:
            assembled = self.plan.builder.build(self.plan.prompt, history)
            span.set(**rounds.cache_figures(assembled))
        was_unmet = self.budget is not None and self.budget.floor_unmet
        if assembled.floor_unmet and not was_unmet:
            log.warning("floor_unmet", estimated_tokens=assembled.estimated_tokens)
        self.request = assembled
        return assembled

    @property
    def budget(self) -> BudgetFacts | None:
        """What the budget decided for the last request assembled (None before the first)."""
        return self.request.budget if self.request is not None else None

    # --- the tool loop ---

    async def _loop(self) -> TurnOutcome:
        limit = self.settings.max_turns
        while True:
            last = limit > 0 and len(self.rounds) // 2 >= limit
            await self._steer()
            self._check_tokens()
            answer = await self._turn_call(last)
            text, calls = answer.text, list(answer.calls)
            if not calls:
                return self._finish(text)
            if last:  # the model asked for tools anyway: end honestly, without the calls
                note = replies.tool_round_limit(limit)
                return self._finish(f"{text}\n\n{note}" if text else note)
            if (why := self.repeats.check(calls)) is not None:
                raise self._tripped("repeat", why)
            done = await run_tools(
                calls, self.plan.tools, self.tool_calls, self.plan.turn_id, self.plan.on_tool
            )
            self.suspended += done.suspended
            self.entries += [
                self.meter.counted(rounds.assistant_entry(text, calls)),
                self.meter.counted(rounds.results_entry(done.results)),
            ]
            self.rounds += [answer.message, rounds.results_message(done.results, done.images)]
            if self._coming() >= compaction.THRESHOLD * self.window:
                await self._compact_between_rounds()  # a long tool loop compacts, not overflows

    def _coming(self) -> int:
        """About what the next call of the loop sends: the assembled request and this turn's
        rounds so far."""
        assert self.request is not None  # assembled before the first call
        rounds = sum(entry_tokens(entry, self.meter.count) for entry in self.entries)
        return self.request.estimated_tokens + rounds

    async def _steer(self) -> None:
        """Take in what people said since the last round (SPEC §19): their words join the user
        message this round sends (the tool results, or the first call's own message)."""
        if self.plan.steering is None:
            return
        steered = await self.plan.steering(len(self.rounds) // 2)
        blocks = [block for one in steered for block in one.blocks]
        if not blocks:
            return
        self.entries += [one.entry for one in steered]
        if self.rounds:
            last = self.rounds[-1]
            self.rounds[-1] = replace(last, parts=(*last.parts, *blocks))
        else:
            self.opening += blocks

    def _check_tokens(self) -> None:
        """Stop before a call that would take the turn past its token cap: the next call sends
        at least what the last one read and wrote (the first, what the budget estimated)."""
        assert self.request is not None  # assembled before the first call
        coming = self.resent if self.rounds else self.request.estimated_tokens
        why = over_token_cap(self.plan.breakers, self.meter.usage.total, coming)
        if why is not None:
            raise self._tripped("tokens", why)

    def _finish(self, text: str) -> TurnOutcome:
        self.entries.append(self.meter.counted(rounds.assistant_entry(text or EMPTY_ENTRY_TEXT)))
        return TurnOutcome(
            text=text,
            entries=tuple(self.entries),
            history=self.new_history,
            request=self.last_body,
            usage=self.meter.usage,
            attempts=self.attempts,
            budget=self.budget,
            left_out=self.omissions.left_out(answered=True),
            tool_calls=tuple(self.tool_calls),
            suspended=tuple(self.suspended),
        )

    def _request(self, last: bool) -> ModelRequest:
        assert self.request is not None  # assembled before the first call
        request = self.request.request
        if self.opening:
            *before, current = request.messages
            opened = replace(current, parts=(*current.parts, *self.opening))
            request = replace(request, messages=(*before, opened))
        limit = self.settings.max_turns if last else None
        return rounds.with_rounds(request, self.rounds, last=limit)

    async def _turn_call(self, last: bool) -> Answer:
        while True:
            try:
                return await self._send(self._request(last))
            except _CallError as error:
                self.last_body = error.body
                if error.verdict is Verdict.REFUSED and self.omissions.leave_out(
                    error, self.last_body or {}
                ):
                    continue
                if error.verdict is not Verdict.OVERFLOW or self.overflow_handled:
                    raise self._failed(error) from None
                self.overflow_handled = True
                await self._compact_after_overflow(error)

    async def _send(self, request: ModelRequest) -> Answer:
        first_of_request = not self.rounds
        call = await self.calls.call(
            request,
            self._on_text,
            self.meter.charge,
            self.meter.count,
            self.omissions.fit,
            purpose="turn",
            round=len(self.rounds) // 2,
            turn_id=self.plan.turn_id,
        )
        self.last_body = call.body
        self.meter.usage += call.usage
        self.attempts = call.attempts
        self.resent = rounds.total_input(call.usage) + call.usage.output_tokens
        counter = self.meter.counter
        if first_of_request and counter is not None and self.request is not None:
            # The estimate covers the assembled request only, so only its first call teaches.
            counter.observe(self.request.estimated_tokens, rounds.total_input(call.usage))
        return call.answer

    async def _on_text(self, delta: str) -> None:
        self.streamed.append(delta)
        if self.plan.on_text is not None:
            await self.plan.on_text(delta)

    # --- how a turn ends early ---

    def _spend(self, attempts: int, *, tools: bool = True, left_out: bool = False) -> TurnSpend:
        return TurnSpend(
            request=self.last_body,
            usage=self.meter.usage,
            attempts=attempts,
            budget=self.budget,
            tool_calls=tuple(self.tool_calls) if tools else (),
            left_out=self.omissions.left_out(answered=False) if left_out else (),
        )

    def _failed(self, error: _CallError) -> TurnFailed:
        return TurnFailed(
            failure_message(error, self.settings),
            spend=self._spend(error.attempts, left_out=True),
            partial_text="".join(self.streamed),
            entries=tuple(self.entries),
            reply=failure_reply(error),
            timed_out=is_timeout(error.cause),
        )

    def _tripped(self, breaker: str, why: str) -> BreakerTripped:
        breakers = self.plan.breakers
        scope = breakers.tokens_scope
        log.warning("breaker_tripped", breaker=breaker, scope=scope, tokens=self.meter.usage.total)
        return BreakerTripped(
            f"stopped by a cost breaker: {why}.",
            breaker=breaker,
            scope=scope,
            spend=self._spend(self.attempts),
            partial_text="".join(self.streamed),
            entries=tuple(self.entries),
            reply=replies.turn_stopped(breaker, breakers.max_tokens),
        )

    # --- compaction ---

    async def _summarize(self, reason: str) -> Summary | None:
        # The turn's own model (a surface rule may choose one), so its price and window apply.
        name = self.settings.name
        model = self.request.request.model or name if self.request else name
        summary = await summarize(
            self.calls,
            self.settings,
            self.history,
            self.meter,
            model=model,
            reason=reason,
            focus=self.plan.compact_focus,
            window=self.window,
        )
        if summary is not None:
            self.history = summary.history
            self.new_history = self.history
        return summary

    async def _compact_between_rounds(self) -> None:
        """The history is compacted (once a turn); when the rounds alone still fill the window,
        the older rounds' results are replayed as short notes (the model read them already)."""
        if self.new_history is None and not self.compacted_between:
            self.compacted_between = True
            await self._compact_before_call()
        if self._coming() >= compaction.THRESHOLD * self.window:
            self.rounds = rounds.shrunk_rounds(self.rounds)

    async def _compact_before_call(self) -> None:
        try:
            summary = await self._summarize("threshold")
        except _CompactionFailed as exc:
            log.warning("compaction_failed", reason="threshold", error=str(exc), going_on=True)
            return
        if summary is not None:
            self._assemble(summary.history)

    async def _compact_after_overflow(self, error: _CallError) -> None:
        try:
            summary = await self._summarize("overflow")
        except _CompactionFailed as exc:
            raise TurnFailed(
                f"the request is over the model's context window ({error}) and compacting the "
                f"history failed ({exc}).",
                spend=self._spend(error.attempts, tools=False),
                partial_text="".join(self.streamed),
                entries=tuple(self.entries),
                reply=replies.MODEL_UNAVAILABLE,
            ) from None
        if summary is None:
            raise self._failed(error)
        self._assemble(summary.history)

    async def _compact_only(self) -> TurnOutcome:
        try:
            summary = await self._summarize("command")
        except _CompactionFailed as exc:
            raise TurnFailed(
                f"/compact failed: {exc}",
                spend=TurnSpend(usage=self.meter.usage),
                reply=replies.COMPACT_FAILED,
            ) from None
        if summary is None:
            text = replies.nothing_older_to_compact(len(self.history))
            return TurnOutcome(text=text, entries=(), usage=self.meter.usage, attempts=0)
        text = replies.compacted(summary.summarized, len(summary.history) - 1)
        return TurnOutcome(
            text=text,
            entries=(),
            history=summary.history,
            request=summary.body,
            usage=self.meter.usage,
            attempts=summary.attempts,
        )
