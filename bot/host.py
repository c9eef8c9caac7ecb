"""The host: conversation lanes and the turn pipeline, wired only to ports.

A lane runs the turns of one conversation strictly one after another; different conversations run
concurrently. A turn goes: recall -> assemble -> model (tool rounds, compaction) -> publish
(history, memory, turn record) -> deliver through the channel's deliverer and the hidden route.
A turn that fails or is cancelled after admission publishes a continuity account instead, so the
next turn of that conversation knows what happened; the lane guarantees it waits for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import structlog

from bot.budget import Budgets, surface_key
from bot.config import HostSettings
from bot.lanes import LaneFull, Lanes
from bot.ports import (
    Admission,
    AssembledRequest,
    Deliverer,
    DeliveryReport,
    HistoryStore,
    MemoryCapture,
    MemoryScope,
    MemoryStore,
    ModelRuntime,
    Tool,
    TurnFailed,
    TurnPlan,
    TurnRecord,
    TurnRecords,
    TurnResult,
    Usage,
)
from bot.prompt import (
    SILENT_TOKEN,
    Assembler,
    SurfacePrompt,
    UnknownSkill,
    WindowExceeded,
    host_command,
    speaker_label,
)
from bot.ratelimit import PersonRate
from bot.recall import RecallCache, request_holds, without_recalled_words
from bot.replies import budget_reached, greeting, help_text
from bot.surfaces import NO_POLICY, Policies, SurfacePolicy
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    ReplyRoute,
    SurfaceKind,
    TextBlock,
    TurnRequest,
)

log = structlog.get_logger(__name__)

CONTINUITY_MAX_BYTES = 48 * 1024

BUSY_REPLY = (
    "I'm still working through earlier messages in this conversation. "
    "Please send this again in a minute."
)
RATE_LIMITED_REPLY = "You're sending messages faster than I can answer. Please wait a moment."
FAILED_REPLY = "Sorry, I couldn't answer that just now. Please try again in a little while."
TOO_LARGE_REPLY = (
    "That message is too large for me to read in one go. Please shorten it or split it up."
)


@runtime_checkable
class StreamingDeliverer(Protocol):
    """A deliverer that can show text as it arrives (the console)."""

    async def stream(self, route: ReplyRoute, delta: str) -> None: ...


ToolsFor = Callable[[TurnRequest, RecallCache], Sequence[Tool]]


class Host:
    """Owns the lanes; implements `bot.ports.TurnSink` for the channels."""

    def __init__(
        self,
        *,
        assembler: Assembler,
        model: ModelRuntime,
        history: HistoryStore,
        records: TurnRecords,
        memory: MemoryStore | None,
        tools_for: ToolsFor,
        settings: HostSettings,
        clock: Callable[[], float] = time.monotonic,
        policies: Policies | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self._assembler = assembler
        self._model = model
        self._history = history
        self._records = records
        self._memory = memory
        self._tools_for = tools_for
        self._settings = settings
        self._policies = policies
        self._budgets = budgets
        self._deliverers: dict[str, Deliverer] = {}
        self._lanes: Lanes[TurnRequest, TurnResult] = Lanes(
            self._turn,
            depth=settings.queue_per_conversation,
            cancelled=lambda request: TurnResult(request.turn_id, "cancelled"),
        )
        self._rate = PersonRate(settings.turns_per_person_per_minute, clock)
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.observers: list[Callable[[TurnRecord], None]] = []

    # --- wiring -----------------------------------------------------------------------------

    def attach(self, platform: str, deliverer: Deliverer) -> None:
        self._deliverers[platform] = deliverer

    def deliverer(self, platform: str) -> Deliverer | None:
        return self._deliverers.get(platform)

    @property
    def queue_depth(self) -> int:
        return self._lanes.depth

    # --- intake -----------------------------------------------------------------------------

    async def submit(self, request: TurnRequest) -> Admission:
        """Queue a turn on its conversation's lane; refusals answer the person politely."""
        admission, _ = await self._admit(request)
        return admission

    async def run(self, request: TurnRequest) -> TurnResult:
        """Queue a turn and wait until it has been published and delivered."""
        admission, future = await self._admit(request)
        if future is None:
            return TurnResult(request.turn_id, admission.value)
        return await future

    async def _admit(
        self, request: TurnRequest
    ) -> tuple[Admission, asyncio.Future[TurnResult] | None]:
        if self._closed:
            return Admission.CLOSED, None
        if not self._rate.allow(request.person):
            log.info("turn_rate_limited", conversation_key=request.conversation_key)
            self._reply_later(request, RATE_LIMITED_REPLY)
            return Admission.RATE_LIMITED, None
        try:
            future = self._lanes.put(request.conversation_key, request)
        except LaneFull:
            log.info("turn_busy", conversation_key=request.conversation_key)
            self._reply_later(request, BUSY_REPLY)
            return Admission.BUSY, None
        return Admission.ACCEPTED, future

    async def idle(self) -> None:
        """Return when every lane is empty and every background capture has finished."""
        await self._lanes.idle()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def close(self, grace: float | None = None) -> None:
        """Stop intake, let running turns finish up to `grace`, cancel the rest."""
        self._closed = True
        await self._lanes.close(self._settings.shutdown_grace if grace is None else grace)
        await self.idle()

    # --- the turn pipeline ------------------------------------------------------------------

    async def _turn(self, request: TurnRequest) -> TurnResult:
        bound = log.bind(turn_id=request.turn_id, conversation_key=request.conversation_key)
        with structlog.contextvars.bound_contextvars(
            turn_id=request.turn_id, conversation_key=request.conversation_key
        ):
            try:
                return await self._turn_inner(request)
            except asyncio.CancelledError:
                bound.info("turn_cancelled")
                raise
            except Exception as exc:  # the host keeps running whatever one turn does
                bound.exception("turn_crashed", error=type(exc).__name__)
                await self._reply(request, FAILED_REPLY)
                return TurnResult(request.turn_id, "failed", error=type(exc).__name__)

    async def _turn_inner(self, request: TurnRequest) -> TurnResult:
        started = datetime.now(UTC)
        policy = self._policy(request)
        refused = await self._over_budget(request, policy, started)
        if refused is not None:
            return refused
        surface = surface_prompt(policy)
        text = request.text
        command = host_command(text)
        if command == "compact":
            async with self._working(request.route):
                return await self._compact(request, started)
        if command is not None:  # /start, /help: answered by the host, no model call
            reply = greeting(self._assembler.agent) if command == "start" else None
            reply = reply or help_text(self._assembler.agent)
            delivery = await self._reply(request, reply)
            await self._record(request, started, "command")
            return TurnResult(request.turn_id, "command", reply, delivery)
        try:
            skills, text = self._assembler.split_skill_command(text)
        except UnknownSkill as exc:
            delivery = await self._reply(request, str(exc))
            await self._record(request, started, "refused", error="unknown_skill")
            return TurnResult(request.turn_id, "refused", str(exc), delivery)

        history = await self._history.load(request.conversation_key)
        recall = RecallCache(
            self._memory,
            memory_scope(request),
            request_holds(request, history),
            render=self._assembler.recalled_block,
        )
        hits = await recall.recall(text) if self._memory is not None else []
        user_entry = self._assembler.user_entry(replace(request, text=text))
        ttl = self._assembler.cache_ttl_for(history, request.received_at)
        self._log_context(request)

        budget: dict[str, object] = {}

        def assemble(entries: Sequence[HistoryEntry]) -> AssembledRequest:
            assembled = self._assembler.assemble(
                request,
                entries,
                hits,
                turn_skills=skills,
                cache_ttl=ttl,
                text=text,
                surface=surface,
            )
            if assembled.floor_unmet and not budget.get("floor_unmet"):
                log.warning("floor_unmet", estimated_tokens=assembled.estimated_tokens)
            budget.update(
                floor_unmet=assembled.floor_unmet,
                estimated_tokens=assembled.estimated_tokens,
                history_used=assembled.history_used,
            )
            return assembled

        plan = TurnPlan(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            history=history,
            assemble=assemble,
            tools=self._tools_for(request, recall),
            on_text=self._streamer(request),
        )
        # The progress sign (reaction, typing) stays up until the answer has been posted.
        async with self._working(request.route):
            return await self._call_and_publish(request, plan, user_entry, started, budget)

    async def _call_and_publish(
        self,
        request: TurnRequest,
        plan: TurnPlan,
        user_entry: HistoryEntry,
        started: datetime,
        budget: Mapping[str, object],
    ) -> TurnResult:
        try:
            outcome = await self._model.run(plan)
        except WindowExceeded as exc:
            delivery = await self._reply(request, TOO_LARGE_REPLY)
            # The floors alone do not fit the window: unmet by definition.
            details = {**budget, "floor_unmet": True}
            await self._record(request, started, "refused", error=exc.code, details=details)
            return TurnResult(request.turn_id, "refused", TOO_LARGE_REPLY, delivery, exc.code)
        except TurnFailed as failure:
            await self._publish_continuity(request, user_entry, failure.partial_text, str(failure))
            reply = failure.reply or FAILED_REPLY
            delivery = await self._reply(request, reply)
            await self._record(
                request,
                started,
                "failed",
                error=str(failure),
                request_body=failure.request,
                usage=failure.usage,
                attempts=failure.attempts,
                details=budget,
            )
            return TurnResult(request.turn_id, "failed", reply, delivery, str(failure))
        except asyncio.CancelledError:
            await asyncio.shield(self._cancelled(request, user_entry, started))
            raise

        entries = [user_entry, *without_recalled_words(outcome.entries)]
        if outcome.history is not None:
            await self._history.publish(
                request.conversation_key, [*outcome.history, *entries], replace=True
            )
        else:
            await self._history.publish(request.conversation_key, entries)
        self._capture(request, user_entry, outcome.text)
        silent = request.kind is ConversationKind.REQUEST and outcome.text.strip() == SILENT_TOKEN
        delivery = None if silent else await self._deliver(request, outcome.text)
        result = "silent" if silent else "ok"
        await self._record(
            request,
            started,
            result,
            request_body=outcome.request,
            usage=outcome.usage,
            attempts=outcome.attempts,
            details={"delivered": delivery.delivered if delivery else None, **budget},
        )
        return TurnResult(request.turn_id, result, outcome.text, delivery)

    async def _compact(self, request: TurnRequest, started: datetime) -> TurnResult:
        history = await self._history.load(request.conversation_key)
        if not history:
            reply = "There is nothing to compact yet."
            return TurnResult(request.turn_id, "ok", reply, await self._reply(request, reply))

        surface = surface_prompt(self._policy(request))

        def assemble(entries: Sequence[HistoryEntry]) -> AssembledRequest:
            return self._assembler.assemble(
                request, entries, (), text=request.text, surface=surface
            )

        plan = TurnPlan(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            history=history,
            assemble=assemble,
            compact_only=True,
        )
        try:
            outcome = await self._model.run(plan)
        except TurnFailed as failure:
            reply = failure.reply or FAILED_REPLY
            await self._record(request, started, "failed", error=str(failure))
            return TurnResult(request.turn_id, "failed", reply, await self._reply(request, reply))
        if outcome.history is not None:
            await self._history.publish(request.conversation_key, outcome.history, replace=True)
        await self._record(request, started, "compacted", usage=outcome.usage)
        delivery = await self._deliver(request, outcome.text)
        return TurnResult(request.turn_id, "ok", outcome.text, delivery)

    async def _cancelled(
        self, request: TurnRequest, user_entry: HistoryEntry, started: datetime
    ) -> None:
        await self._publish_continuity(request, user_entry, "", "the turn was cancelled")
        await self._record(request, started, "cancelled")

    async def _publish_continuity(
        self, request: TurnRequest, user_entry: HistoryEntry, partial: str, reason: str
    ) -> None:
        """Record that this turn did not complete, so the next turn is not left guessing."""
        try:
            await self._history.publish(
                request.conversation_key, continuity_account(user_entry, partial, reason)
            )
        except Exception:
            log.exception("continuity_publish_failed", conversation_key=request.conversation_key)

    # --- surface policy and budgets ----------------------------------------------------------

    def _policy(self, request: TurnRequest) -> SurfacePolicy:
        return self._policies.for_request(request) if self._policies is not None else NO_POLICY

    async def _over_budget(
        self, request: TurnRequest, policy: SurfacePolicy, started: datetime
    ) -> TurnResult | None:
        """Refuse the turn before any model call when a budget is reached; the first refusal
        of a budget on a day tells the person, the rest stay quiet."""
        if self._budgets is None:
            return None
        refusal = await self._budgets.check(request, policy.budget, started)
        if refusal is None:
            return None
        log.info("turn_over_budget", budget=refusal.scope, notified=refusal.notify)
        reply = budget_reached(refusal.scope, refusal.resets_at) if refusal.notify else ""
        delivery = await self._reply(request, reply) if reply else None
        await self._record(request, started, "over_budget", error=f"budget:{refusal.scope}")
        return TurnResult(request.turn_id, "over_budget", reply, delivery, refusal.scope)

    # --- side effects -----------------------------------------------------------------------

    def _capture(self, request: TurnRequest, user_entry: HistoryEntry, answer: str) -> None:
        if self._memory is None or not answer.strip():
            return
        item = MemoryCapture(
            conversation_key=request.conversation_key,
            surface=memory_scope(request).surface,
            person=request.person,
            speaker_label=user_entry.speaker,
            user_text=user_entry.text,
            answer=answer,
            at=request.received_at,
            turn_id=request.turn_id,
        )
        memory = self._memory

        async def capture() -> None:
            for attempt in (1, 2):
                try:
                    await memory.capture(item)
                    return
                except Exception as exc:  # capture never fails a turn
                    log.warning("memory_capture_failed", attempt=attempt, error=type(exc).__name__)
                    await asyncio.sleep(0.05)

        self._in_background(capture())

    async def _record(
        self,
        request: TurnRequest,
        started: datetime,
        outcome: str,
        *,
        error: str | None = None,
        request_body: Mapping[str, object] | None = None,
        usage: Usage | None = None,
        attempts: int = 0,
        details: Mapping[str, object] | None = None,
    ) -> None:
        record = TurnRecord(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            channel=request.channel,
            started_at=started,
            finished_at=datetime.now(UTC),
            outcome=outcome,
            request=request_body,
            usage=usage or Usage(),
            attempts=attempts,
            error=error,
            details={**(details or {}), **self._where(request)},
        )
        for observer in self.observers:
            observer(record)
        latency_ms = (record.finished_at - started).total_seconds() * 1000
        log.info(
            "turn_finished",
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            outcome=outcome,
            latency_ms=round(latency_ms, 1),
            attempts=attempts,
            input_tokens=record.usage.input_tokens,
            cache_read_tokens=record.usage.cache_read_tokens,
            cache_write_tokens=record.usage.cache_write_tokens,
            output_tokens=record.usage.output_tokens,
        )
        try:
            await self._records.save(record)
        except Exception:
            log.exception("turn_record_failed", turn_id=request.turn_id)
        if self._budgets is not None:
            try:
                await self._budgets.charge(request, record)
            except Exception:
                log.exception("usage_charge_failed", turn_id=request.turn_id)

    def _where(self, request: TurnRequest) -> dict[str, object]:
        """Where the turn happened and which surface rule applied, for the turn record."""
        where: dict[str, object] = {"surface": surface_key(request)}
        policy = self._policy(request)
        if policy.rule is not None:
            where["surface_rule"] = policy.label
        return where

    def _log_context(self, request: TurnRequest) -> None:
        log.info(
            "turn_context",
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            speaker=speaker_label(request.speaker) if request.speaker else None,
            preceding=len(request.preceding),
            preceding_bytes=sum(len(m.text.encode()) for m in request.preceding),
        )

    def _streamer(self, request: TurnRequest) -> Callable[[str], Awaitable[None]] | None:
        route = request.route
        deliverer = self._deliverers.get(route.platform) if route else None
        if route is None or not isinstance(deliverer, StreamingDeliverer):
            return None
        streaming: StreamingDeliverer = deliverer

        async def on_text(delta: str) -> None:
            await streaming.stream(route, delta)

        return on_text

    @contextlib.asynccontextmanager
    async def _working(self, route: ReplyRoute | None) -> AsyncIterator[None]:
        deliverer = self._deliverers.get(route.platform) if route else None
        if route is None or deliverer is None:
            yield
            return
        async with deliverer.working(route):
            yield

    async def _deliver(self, request: TurnRequest, text: str) -> DeliveryReport | None:
        route = request.route
        if route is None:
            return None
        deliverer = self._deliverers.get(route.platform)
        if deliverer is None:
            log.error("no_deliverer", platform=route.platform, turn_id=request.turn_id)
            return DeliveryReport(parts=1, accepted=0, error=f"no channel {route.platform!r}")
        try:
            report = await deliverer.deliver(route, text)
        except Exception as exc:
            log.exception("delivery_failed", turn_id=request.turn_id)
            return DeliveryReport(parts=1, accepted=0, error=type(exc).__name__)
        if not report.delivered:
            log.warning("delivery_incomplete", turn_id=request.turn_id, error=report.error)
        return report

    async def _reply(self, request: TurnRequest, text: str) -> DeliveryReport | None:
        """A host-written answer (refusal, failure). Request-driven turns get none: their
        destination is an audience that asked nothing, and the run record says what happened."""
        if request.kind is ConversationKind.REQUEST:
            return None
        return await self._deliver(request, text)

    def _reply_later(self, request: TurnRequest, text: str) -> None:
        """Answer a refused turn without holding up the channel's intake (a rate-limited
        platform could make that answer wait a long time)."""

        async def reply() -> None:
            await self._reply(request, text)

        self._in_background(reply())

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Side work (captures, refusal answers) that `idle()` and `close()` wait for."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def memory_scope(request: TurnRequest) -> MemoryScope:
    """Where this turn's words were heard, for the memory privacy rule (SPEC §6)."""
    if request.surface is None:
        return MemoryScope(
            surface=request.conversation_key, person=request.person, surfaceless=True
        )
    return MemoryScope(
        surface=f"{request.channel}:{request.surface.id}",
        person=request.person,
        private=request.surface.kind is SurfaceKind.DM,
    )


def surface_prompt(policy: SurfacePolicy) -> SurfacePrompt:
    """What the surface's rule changes in the model request."""
    rule = policy.rule
    if rule is None:
        return SurfacePrompt()
    return SurfacePrompt(policy.instructions, tuple(rule.skills), rule.model, rule.max_tokens)


def continuity_account(user_entry: HistoryEntry, partial: str, reason: str) -> list[HistoryEntry]:
    """The request plus one host-written entry saying plainly the turn did not complete."""
    note = f"[The host: this turn did not complete ({reason}). The person got no full answer.]"
    if partial.strip():
        room = CONTINUITY_MAX_BYTES - len(note.encode()) - 64
        cut = partial.encode()[: max(room, 0)].decode(errors="ignore")
        note += f"\n[Partial answer before it stopped:]\n{cut}"
    user = _bounded_entry(user_entry)
    return [user, HistoryEntry("assistant", (TextBlock(note),), at=user_entry.at)]


def _bounded_entry(entry: HistoryEntry) -> HistoryEntry:
    text = entry.text
    if len(text.encode()) <= CONTINUITY_MAX_BYTES:
        return entry
    cut = text.encode()[:CONTINUITY_MAX_BYTES].decode(errors="ignore")
    return replace(entry, blocks=(TextBlock(cut),), tokens=0)
