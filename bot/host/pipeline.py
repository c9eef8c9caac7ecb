"""Running one job on its lane: a turn passes the ordered handlers until one concludes it.

Each handler (registered as data, in order, by the facade) returns a `Conclusion` or None to
pass the turn on; the last one, the model turn, concludes every turn that reaches it. The
conclusion is published and delivered here. A turn that crashes publishes a continuity account;
one cut short by shutdown goes down with its lane; one a person stopped ends alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import structlog

from bot import replies, tracing
from bot.agents import SOLO, Agent, Roster
from bot.host.conclusions import STOPPED, Conclusion, record
from bot.host.continuity import HOST_FAILED, STOPPED_BY_PERSON, ToolsRan, continuity_account
from bot.host.delivery import Delivery
from bot.host.job import Job, open_trace
from bot.host.lookups import completed
from bot.host.publisher import Publisher
from bot.policy.surfaces import SurfacePolicy
from bot.ports.intake import Inbox, RequestCompleter, TurnResult
from bot.ports.outbox import InboxState
from bot.ports.records import TurnRecord, Usage
from bot.prompt import Assembler
from bot.turns import HistoryEntry, Outcome, TextBlock, TurnRequest

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 10  # restarted runs of one inbox item before it is given up as crashed


@dataclass
class Turn:
    """One turn on its way through the handlers. A handler may change `request` for the ones
    after it (a continuation's note becomes its text); `keep` holds what stays open until the
    turn's conclusion is delivered (the progress sign); `ran`, the tool calls that ran so far
    (a turn that crashes still accounts for them)."""

    job: Job
    request: TurnRequest
    started: datetime
    policy: SurfacePolicy
    keep: contextlib.AsyncExitStack
    ran: ToolsRan = field(default_factory=ToolsRan)
    agent: Agent = SOLO.default  # who answers it (SPEC §15)

    def record(
        self,
        outcome: Outcome,
        *,
        error: str | None = None,
        request_body: Mapping[str, object] | None = None,
        usage: Usage | None = None,
        attempts: int = 0,
        details: Mapping[str, object] | None = None,
    ) -> TurnRecord:
        return record(
            self.request,
            self.started,
            outcome,
            self.policy,
            error=error,
            request_body=request_body,
            usage=usage,
            attempts=attempts,
            details=details,
        )

    def answered_by_host(
        self,
        outcome: Outcome,
        state: InboxState,
        say: str,
        *,
        error: str | None = None,
        details: Mapping[str, object] | None = None,
        private: bool = False,
        public: str | None = None,
    ) -> Conclusion:
        """A conclusion the host wrote itself: no model call, nothing kept in history
        (`private`, `public`: see `Conclusion`)."""
        ended = self.record(outcome, error=error, details=details)
        return Conclusion(ended, state, say, private=private, public=public)


# One step of the pipeline: conclude the turn, or return None to pass it on.
Handler = Callable[[Turn], Awaitable[Conclusion | None]]


class Stops:
    """The task running each conversation's current model call, and the turns a person stopped."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[str, asyncio.Task[Any]]] = {}
        self._stopped: dict[str, str] = {}  # turn id -> why a person stopped it
        self._pending: dict[str, str] = {}  # turn id -> why: stop it once it can be stopped

    def cancel(self, conversation_key: str, why: str = STOPPED_BY_PERSON) -> bool:
        """Stop the conversation's running model call (`why`: the stop button, or a newer
        message under `busy = "interrupt"`); False when none runs here."""
        running = self._running.get(conversation_key)
        if running is None:
            return False
        turn_id, task = running
        if turn_id in self._stopped:
            return True  # already stopping (a second press): cancelling twice would look like
            # shutdown to the pipeline
        self._stopped[turn_id] = why
        task.cancel()
        log.info("turn_stop_requested", turn_id=turn_id, conversation_key=conversation_key, why=why)
        return True

    def stop_soon(self, turn_id: str, why: str) -> None:
        """Stop this turn as soon as its model call starts (it is still being prepared); nothing
        when it ends first."""
        self._pending[turn_id] = why

    def stopped(self, turn_id: str) -> str | None:
        """Why a person stopped this turn; None when nobody did (shutdown may cancel it)."""
        return self._stopped.get(turn_id)

    def forget(self, turn_id: str) -> None:
        self._stopped.pop(turn_id, None)
        self._pending.pop(turn_id, None)

    @contextlib.contextmanager
    def stoppable(self, request: TurnRequest) -> Iterator[None]:
        """While the model call runs (or waits for its slot), `cancel` may stop it; not before
        (the turn is still being prepared) nor after (its answer is being published and
        delivered whole)."""
        task = asyncio.current_task()
        assert task is not None
        key = request.conversation_key
        self._running[key] = (request.turn_id, task)
        why = self._pending.pop(request.turn_id, None)
        if why is not None:  # asked for while it was being prepared: it stops at its first await
            self.cancel(key, why)
        try:
            yield
        finally:
            if self._running.get(key, ("",))[0] == request.turn_id:
                del self._running[key]


class Pipeline:
    """Runs a lane's jobs: leftover parts are delivered, turns pass the handlers."""

    def __init__(
        self,
        handlers: Sequence[Handler],
        publisher: Publisher,
        stops: Stops,
        *,
        delivery: Delivery,
        inbox: Inbox,
        assembler: Assembler,
        completers: Mapping[str, RequestCompleter],
        policy: Callable[[TurnRequest], SurfacePolicy],
        roster: Roster = SOLO,
    ) -> None:
        self._handlers = tuple(handlers)
        self._roster = roster
        self._publisher = publisher
        self._stops = stops
        self._delivery = delivery
        self._inbox = inbox
        self._assembler = assembler
        self._completers = completers
        self._policy = policy

    async def run(self, job: Job) -> TurnResult:
        if job.request is None:
            report = await self._delivery.leftovers(job.leftovers)
            return TurnResult(job.turn_id, Outcome.OK if report.delivered else Outcome.UNDELIVERED)
        trace = job.trace if job.trace is not tracing.NO_TURN else open_trace(job.request)
        with (
            trace.active(end=True),
            structlog.contextvars.bound_contextvars(
                turn_id=job.request.turn_id, conversation_key=job.request.conversation_key
            ),
        ):
            if job.resumed and job.item_id is not None and await self._gave_up(job):
                return TurnResult(job.turn_id, Outcome.CRASHED, error="interrupted too often")
            request = await completed(self._completers, job.request)
            return await self._turn(replace(job, request=request), request)

    async def _turn(self, job: Job, request: TurnRequest) -> TurnResult:
        started = datetime.now(UTC)
        ran = ToolsRan()
        try:
            async with contextlib.AsyncExitStack() as keep:
                policy = self._policy(request)
                agent = self._answering(request, policy)
                if self._roster.several:  # carried on: approvals, records, delivery name it
                    request = replace(request, agent=agent.name)
                turn = Turn(job, request, started, policy, keep, ran, agent)
                for handler in self._handlers:
                    conclusion = await handler(turn)
                    if conclusion is not None:
                        return await self._publisher.conclude(job, conclusion)
                raise RuntimeError("no handler concluded the turn")
        except asyncio.CancelledError:
            log.info("turn_cancelled")
            task = asyncio.current_task()
            by_person = self._stops.stopped(request.turn_id) is not None
            if not by_person or task is None or task.cancelling() > 1:
                raise  # shutdown (as well): the lane goes down
            task.uncancel()  # a person's stop ends this turn only; the lane runs on
            return TurnResult(request.turn_id, Outcome.CANCELLED, error=STOPPED)
        except Exception as exc:  # the host keeps running whatever one turn does
            log.exception("turn_crashed", error=type(exc).__name__)
            return await self._crashed(job, request, started, type(exc).__name__, ran)
        finally:
            self._stops.forget(request.turn_id)

    def _answering(self, request: TurnRequest, policy: SurfacePolicy) -> Agent:
        """The agent a hand-off names, else the one its text addresses among its place's."""
        if request.agent is not None:
            return self._roster.get(request.agent)
        return self._roster.answering(request.text, policy.rule)

    async def _gave_up(self, job: Job) -> bool:
        """Count one more start of an item an earlier process left pending; past MAX_ATTEMPTS
        (it was running each time a process stopped: maybe it is what stops them), give it up
        as crashed instead of running it again."""
        assert job.request is not None
        assert job.item_id is not None
        if await self._inbox.claim(job.item_id) <= MAX_ATTEMPTS:
            return False
        log.error("turn_given_up", attempts=MAX_ATTEMPTS)
        await self._crashed(job, job.request, datetime.now(UTC), "interrupted too often")
        return True

    async def _crashed(
        self,
        job: Job,
        request: TurnRequest,
        started: datetime,
        error: str,
        ran: ToolsRan | None = None,
    ) -> TurnResult:
        try:
            user_entry = self._assembler.user_entry(request)
        except Exception:  # the assembler itself may be what failed
            user_entry = HistoryEntry("user", (TextBlock(request.text),), at=request.received_at)
        ended = self._publisher.record(request, started, Outcome.CRASHED, error=error)
        account = continuity_account(user_entry, "", HOST_FAILED, ran, job.absorbed.entries)
        conclusion = Conclusion(ended, InboxState.CRASHED, replies.TURN_FAILED, entries=account)
        return await self._publisher.conclude(job, conclusion)
