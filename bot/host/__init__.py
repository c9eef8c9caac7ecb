"""The host: the facade that builds the turn pipeline from its parts and wires them together.

A channel's event goes: intake (stored in the inbox, deduplicated, admitted under the person's
rate and the lane's depth) -> the work source (queued on its conversation's lane now, after
`resume()`, or when this replica adopts the conversation) -> the pipeline (the handlers, in
order, until one concludes the turn; the last is the model turn) -> the publisher (one
publication: history, parts, item state, record, charge, memory capture) -> delivery. A lane runs
one conversation's turns strictly in order; different conversations run concurrently, at most
`max_concurrent_turns` model calls at once. `close()` stops intake, lets running turns finish and
posts what is left in the outbox.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from bot.config import HostSettings
from bot.host import commands
from bot.host.answering import Answering
from bot.host.budget_gate import BudgetGate
from bot.host.busy import Busy
from bot.host.conclusions import policy_of
from bot.host.continuation import Continuing
from bot.host.delivery import Delivery
from bot.host.inputs import NO_RULES, HostStores, Outlets, Thinking, TurnRules
from bot.host.intake import Gate, Intake
from bot.host.job import Job
from bot.host.lanes import Lanes
from bot.host.model_turn import ModelTurn
from bot.host.pipeline import Handler, Pipeline, Stops
from bot.host.publisher import Publisher
from bot.host.work import SHARE_SWEEP_SECONDS, Replicas, SingleProcess, WorkSource
from bot.ports.history import Chatter
from bot.ports.intake import Admission, Resumer, TurnResult
from bot.ports.records import TurnRecord
from bot.turns import Outcome, TurnRequest

log = structlog.get_logger(__name__)

OUTBOX_DRAIN_SECONDS = 15.0  # at shutdown, after the turns: what is left waits for the next start


class Host:
    """Builds and wires the pipeline; implements `bot.ports.intake.TurnSink` for the channels."""

    def __init__(
        self,
        *,
        thinking: Thinking,
        stores: HostStores,
        outlets: Outlets,
        settings: HostSettings,
        rules: TurnRules = NO_RULES,
        resumers: Mapping[str, Resumer] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sweep_seconds: float = SHARE_SWEEP_SECONDS,
    ) -> None:
        self._settings = settings
        self._stores = stores
        self._rules = rules
        self._closing = asyncio.Event()  # set when shutdown begins: intake refused, no retries
        self._delivery = Delivery(stores.outbox, outlets.deliverers, self._closing)
        answering = Answering(self._delivery, stores.outbox)
        self._publisher = publisher = Publisher(
            stores.outbox,
            answering,
            policies=rules.policies,
            budgets=rules.budgets,
            memory_on=stores.memory is not None,
            closing=self._closing,
        )
        self._stops = Stops()
        self._lanes: Lanes[Job, TurnResult] = Lanes(
            self._work,
            depth=settings.queue_per_conversation,
            cancelled=lambda job: TurnResult(job.turn_id, Outcome.CANCELLED),
        )
        policy = lambda request: policy_of(rules.policies, request)  # noqa: E731
        busy = Busy(
            self._lanes,
            self._stops,
            lambda key: self._source.gather(key),
            thinking.assembler,
            outlets.completers,
            policy,
        )
        model_calls = asyncio.Semaphore(settings.max_concurrent_turns)
        model_turn = ModelTurn(
            thinking,
            stores,
            rules,
            publisher,
            answering,
            self._stops,
            model_calls,
            steering=busy.steering,
        )
        compact = (thinking, stores.history, answering, model_calls)
        # The turn handlers, in order: the first to conclude a turn ends it.
        handlers: list[Handler | None] = [
            Continuing(resumers or {}, answering),
            commands.MemoryCommands(stores.memory),
            commands.UsageCommand(rules.budgets),
            commands.SchedulesCommand(stores.schedules, rules.operators)
            if stores.schedules is not None
            else None,
            BudgetGate(rules.budgets) if rules.budgets is not None else None,
            commands.HostCommands(*compact, schedules=stores.schedules is not None),
            commands.NoSuchSkill(thinking),
            model_turn,
        ]
        self._pipeline = Pipeline(
            [handler for handler in handlers if handler is not None],
            publisher,
            self._stops,
            delivery=self._delivery,
            inbox=stores.inbox,
            assembler=thinking.assembler,
            completers=dict(outlets.completers),
            policy=policy,
            roster=thinking.roster,
        )
        self._gate = Gate(
            self._lanes,
            publisher,
            turns_per_minute=settings.turns_per_person_per_minute,
            arrived=busy.arrived,
            clock=clock,
        )
        self._source: WorkSource = (
            Replicas(stores.share, self._lanes, self._gate.admit, self._closing, sweep_seconds)
            if stores.share is not None
            else SingleProcess(
                stores.inbox, stores.outbox, self._lanes, self._gate.admit, self._closing
            )
        )
        self._intake = Intake(stores.inbox, self._gate, self._source, self._closing)

    @property
    def observers(self) -> list[Callable[[TurnRecord], None]]:
        """Called with each turn's record once it is published (metrics, tests)."""
        return self._publisher.observers

    @property
    def queue_depth(self) -> int:
        return self._lanes.depth

    @property
    def draining(self) -> bool:
        """True from the moment shutdown begins: intake refused, running turns finishing."""
        return self._closing.is_set()

    async def submit(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> Admission:
        return await self._intake.submit(request, source=source, marks=marks, consumes=consumes)

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        return await self._intake.note(source=source, marks=marks, chatter=chatter)

    async def run(self, request: TurnRequest) -> TurnResult:
        return await self._intake.run(request)

    async def cancel(self, conversation_key: str) -> bool:
        """A person stopped the conversation's running turn (Slack's stop button, a second Ctrl-C
        in `bot chat`): its model call is abandoned, nothing more of its answer is shown, the
        turn ends with a short note where its answer was, and the conversation keeps its
        continuity account. False when no turn of that conversation is running here."""
        return self._stops.cancel(conversation_key)

    async def command(self, request: TurnRequest) -> str:
        """A host command sent beside the conversation rather than into it (Slack's slash
        commands): `/memory`, `/forget N|all`, `/usage` or `/schedules [remove ID]`, answered here
        from the person's own data (and the place's schedules) in the request's scope, with no
        model call, nothing kept in history and no lane (it waits for no turn). The reply is the
        person's alone; the channel shows it privately."""
        stores, rules = self._stores, self._rules
        return await commands.beside(
            request, stores.memory, rules.budgets, stores.schedules, rules.operators
        )

    async def resume(self) -> None:
        """Queue what an earlier process left (`bot.host.work`), and from now on what is
        accepted."""
        await self._source.resume()

    async def idle(self) -> None:
        """Return when every lane is empty and every refusal is published."""
        await self._lanes.idle()
        await self._gate.settled()

    async def close(self, grace: float | None = None) -> None:
        """Stop intake, let running turns finish up to `grace` (cancel the rest: they run again
        after the next start), then post what is left in the outbox."""
        self._closing.set()
        await self._source.close()
        await self._lanes.close(self._settings.shutdown_grace if grace is None else grace)
        await self.idle()
        try:
            report = await asyncio.wait_for(self._delivery.drain(), OUTBOX_DRAIN_SECONDS)
        except Exception as exc:  # what is left is posted after the next start
            log.warning("outbox_drain_unfinished", error=type(exc).__name__)
        else:
            if report.parts:
                log.info("outbox_drained", parts=report.parts, accepted=report.accepted)

    async def _work(self, job: Job) -> TurnResult:
        try:
            result = await self._pipeline.run(job)
        except asyncio.CancelledError:  # shutdown: what it took in runs again after the start
            job.absorbed.settle(TurnResult(job.turn_id, Outcome.CANCELLED))
            raise
        job.absorbed.settle(result)  # the messages it took in ended with it
        await self._source.finished(job)
        return result
