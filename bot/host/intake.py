"""Intake: storing what channels hand the host (dedupe), then admitting it to its conversation's
lane under the person's turn rate and the lane's depth, or refusing it with a polite notice.

A channel's event is stored in the inbox before the channel acknowledges it (`submit`); where it
goes then is the work source's business (`bot.host.work`): queued now, held until the host has
resumed, or adopted by this replica.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from bot import replies, tracing
from bot.errors import IntakeUnavailable, LaneFull
from bot.host.conclusions import Conclusion
from bot.host.job import Job, open_trace
from bot.host.lanes import Lanes
from bot.host.publisher import Publisher
from bot.host.ratelimit import PersonRate
from bot.host.redaction import without_secrets
from bot.host.work import WorkSource
from bot.ports.history import Chatter
from bot.ports.intake import Admission, Inbox, TurnResult
from bot.ports.outbox import InboxState
from bot.turns import Outcome, TurnRequest

log = structlog.get_logger(__name__)

REFUSAL_NOTICES_PER_MINUTE = 1  # busy / too-fast notices to one person


class Gate:
    """Admits a turn to its lane, or refuses it: the person is over the turn rate, or the lane is
    full (a continuation is never refused). Refusals are published in the background (they must
    not hold up the channel)."""

    def __init__(
        self,
        lanes: Lanes[Job, TurnResult],
        publisher: Publisher,
        *,
        turns_per_minute: int,
        arrived: Callable[[Job], None] = lambda job: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`arrived`: told of each new message queued (the busy mode of its place may act)."""
        self._lanes = lanes
        self._publisher = publisher
        self._arrived = arrived
        self._rate = PersonRate(turns_per_minute, clock)
        self._notices = PersonRate(REFUSAL_NOTICES_PER_MINUTE, clock)
        self._background: set[asyncio.Task[None]] = set()

    def admit(self, job: Job) -> tuple[Admission, asyncio.Future[TurnResult] | None]:
        request = job.request
        assert request is not None
        # A continuation is no new message: its decision is taken, so it is never refused.
        fresh = request.continues is None
        if fresh and not self._rate.allow(request.person):
            log.info("turn_rate_limited", conversation_key=request.conversation_key)
            self._refuse_later(job, replies.TOO_FAST, Admission.RATE_LIMITED)
            return Admission.RATE_LIMITED, None
        try:
            future = self._lanes.put(request.conversation_key, job, bounded=fresh)
        except LaneFull:
            log.info("turn_busy", conversation_key=request.conversation_key)
            self._refuse_later(job, replies.BUSY, Admission.BUSY)
            return Admission.BUSY, None
        if fresh:
            self._arrived(job)
        return Admission.ACCEPTED, future

    async def settled(self) -> None:
        """Return when every refusal under way is published."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def _refuse_later(self, job: Job, notice: str, why: Admission) -> None:
        """Close a refused turn without holding up the channel's intake (a rate-limited
        platform could make its notice wait a long time). Notices are rate-limited per person:
        someone flooding the bot gets one now and then, not one per message."""
        request = job.request
        assert request is not None
        say = notice if self._notices.allow(request.person) else ""
        publisher = self._publisher

        async def refuse() -> None:
            with job.trace.active(end=True):  # the refused turn's trace ends with its notice
                now = datetime.now(UTC)
                record = publisher.record(request, now, Outcome.REFUSED, error=why.value)
                refused = Conclusion(record, InboxState.REFUSED, say, private=True)
                await publisher.conclude(job, refused)

        self._in_background(refuse())

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class Intake:
    """`submit`, `note` and `run` of `bot.ports.intake.TurnSink`."""

    def __init__(
        self, inbox: Inbox, gate: Gate, source: WorkSource, closing: asyncio.Event
    ) -> None:
        self._inbox = inbox
        self._gate = gate
        self._source = source
        self._closing = closing

    async def submit(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> Admission:
        """Store the turn in the inbox, then queue it; refusals answer the person politely."""
        if self._closing.is_set():
            return Admission.CLOSED
        request = without_secrets(request)  # nothing stored or run carries a pasted secret
        trace = open_trace(request)
        with trace.active(), tracing.span("intake", bot__source=source) as intake:
            admission = await self._accept(request, source, marks, consumes, trace)
            intake.set(bot__admission=admission.value)
        if not admission.acknowledge or admission is Admission.DUPLICATE:
            trace.end()
        return admission

    async def _accept(
        self,
        request: TurnRequest,
        source: str,
        marks: Sequence[str],
        consumes: int | None,
        trace: tracing.TurnTrace,
    ) -> Admission:
        async with self._source.accepting():  # stored and handed over as one, for `resume()`
            try:
                item = await self._inbox.accept(
                    request, source=source, marks=marks, consumes=consumes
                )
            except Exception as exc:  # not stored: the channel must not acknowledge
                log.warning("inbox_unavailable", error=type(exc).__name__, detail=str(exc))
                return Admission.UNAVAILABLE
            if item is None:
                log.info("event_duplicate", conversation_key=request.conversation_key)
                return Admission.DUPLICATE
            return await self._source.accepted(item, trace)

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        if self._closing.is_set():
            raise IntakeUnavailable("the host is shutting down", closing=True)
        try:
            return await self._inbox.note(source=source, marks=marks, chatter=chatter)
        except Exception as exc:
            log.warning("inbox_unavailable", error=type(exc).__name__, detail=str(exc))
            raise IntakeUnavailable(type(exc).__name__) from None

    async def run(self, request: TurnRequest) -> TurnResult:
        """Queue a turn (not from the inbox) and wait until it is published and delivered."""
        if self._closing.is_set():
            return TurnResult(request.turn_id, Outcome.CLOSED)
        trace = open_trace(request)
        with trace.active(), tracing.span("intake", bot__source=request.channel):
            admission, future = self._gate.admit(Job(request, trace=trace))
        if future is None:
            return TurnResult(request.turn_id, Outcome(admission.value))
        return await future
