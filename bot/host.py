"""The host: the durable inbox, conversation lanes and the turn pipeline, wired only to ports.

A channel's event is stored in the inbox before the channel acknowledges it (`submit`), then
queued on its conversation's lane: a lane runs the turns of one conversation strictly one after
another; different conversations run concurrently, at most `max_concurrent_turns` model calls at
once. A turn goes: recall -> assemble -> model (tool rounds, compaction) -> one publication
(history, the answer's outbox parts, the inbox item's terminal state, the turn record) -> delivery
part by part -> memory capture. A turn that fails or crashes publishes a continuity account, so
the next turn of that conversation knows what happened; the lane guarantees it waits for that.
On start, `resume()` queues what an earlier process left unfinished; `close()` stops intake,
lets running turns finish and posts what is left in the outbox.

Replicas on one shared store (a `WorkShare`, SPEC §13) do not run what they accept at once: they
adopt the conversation, which succeeds only when no other live replica owns work in it, and then
run all of its pending items on their lane in accepted order. A replica that finishes a
conversation's work adopts what was accepted for it meanwhile (by any replica), and every
`SHARE_SWEEP_SECONDS` each replica adopts the conversations nobody live owns (left by a replica
that died, or accepted while their owner was finishing), so dead replicas' work is taken over
while the others run, not only at their next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import structlog

from bot import leftout, memory_commands, replies, schedule_commands, tracing
from bot.budget import NO_CAPS, Budgets, SpendCaps, surface_key
from bot.config import HostSettings
from bot.delivery import Delivery
from bot.errors import (
    BreakerTripped,
    ClaimLost,
    IntakeUnavailable,
    LaneFull,
    TurnFailed,
    UnknownSkill,
    WindowExceeded,
)
from bot.inbox import (
    Inbox,
    InboxItem,
    InboxState,
    Outbox,
    OutboxPart,
    Publication,
    RequestCompleter,
    WorkShare,
)
from bot.lanes import Lanes
from bot.memory_commands import is_memory_command
from bot.ports.attachments import AttachmentReader
from bot.ports.cron import ChatSchedules
from bot.ports.delivery import Deliverer
from bot.ports.history import Chatter, HistoryStore
from bot.ports.intake import Admission, Resumer, TurnResult
from bot.ports.memory import MemoryCapture, MemoryStore
from bot.ports.model import (
    BudgetFacts,
    LeftOut,
    ModelRuntime,
    SurfacePrompt,
    TurnOutcome,
    TurnPlan,
)
from bot.ports.records import TurnRecord, Usage
from bot.ports.tools import Tool
from bot.prompt import SILENT_TOKEN, Assembler, host_command, speaker_label
from bot.ratelimit import PersonRate
from bot.recall import RecallCache, request_holds, without_recalled_words
from bot.streaming import AnswerStream
from bot.surfaces import NO_POLICY, Policies, SurfacePolicy, SurfaceRule
from bot.turnprep import memory_scope, surface_prompt
from bot.turns import (
    Attached,
    ConversationKind,
    HistoryEntry,
    Outcome,
    ReplyRoute,
    SurfaceKind,
    TextBlock,
    TurnRequest,
)

log = structlog.get_logger(__name__)

CONTINUITY_MAX_BYTES = 48 * 1024
MAX_ATTEMPTS = 10  # restarted runs of one inbox item before it is given up as crashed
REFUSAL_NOTICES_PER_MINUTE = 1  # busy / too-fast notices to one person
OUTBOX_DRAIN_SECONDS = 15.0  # at shutdown, after the turns: what is left waits for the next start
SHARE_SWEEP_SECONDS = 1.0  # replicas: how often to look for work no live replica owns
SHARE_SWEEP_LIMIT = 100  # conversations adopted per sweep at most
# A publication the store refuses (disk full, database locked) is tried again while the host runs,
# waiting this long first and twice as long each time, up to the cap; its lane waits meanwhile.
PUBLISH_RETRY_FIRST = 0.1
PUBLISH_RETRY_MAX = 30.0
STOPPED = "stopped"  # a stopped turn's record and result error: a person stopped it


# The tools a turn offers: its request, its recall cache, the surface rule that applies.
ToolsFor = Callable[[TurnRequest, RecallCache, SurfaceRule | None], Sequence[Tool]]


@dataclass(frozen=True, slots=True)
class _Job:
    """One piece of a lane's work: a turn (from the inbox when `item_id` is set), or the parts
    an earlier process left undelivered in this conversation."""

    request: TurnRequest | None
    item_id: int | None = None
    leftovers: tuple[OutboxPart, ...] = ()
    resumed: bool = False  # found pending at start: it may have run (and stopped) before
    trace: tracing.TurnTrace = field(default=tracing.NO_TURN, compare=False)  # opened at intake
    # Messages this run's answer stream opened on the platform (index -> platform id), as the
    # stream's close returned them.
    live: Mapping[int, str] = field(default_factory=dict, compare=False)

    @property
    def turn_id(self) -> str:
        return self.request.turn_id if self.request else "leftovers"

    @property
    def request_key(self) -> str:
        return self.request.conversation_key if self.request else ""


class Host:
    """Owns the lanes; implements `bot.ports.intake.TurnSink` for the channels."""

    def __init__(
        self,
        *,
        assembler: Assembler,
        model: ModelRuntime,
        history: HistoryStore,
        inbox: Inbox,
        outbox: Outbox,
        deliverers: Mapping[str, Deliverer],
        completers: Mapping[str, RequestCompleter] | None = None,
        memory: MemoryStore | None,
        tools_for: ToolsFor,
        settings: HostSettings,
        clock: Callable[[], float] = time.monotonic,
        policies: Policies | None = None,
        budgets: Budgets | None = None,
        caps: SpendCaps = NO_CAPS,
        schedules: ChatSchedules | None = None,
        operators: frozenset[str] = frozenset(),
        attachments: AttachmentReader | None = None,
        share: WorkShare | None = None,
        sweep_seconds: float = SHARE_SWEEP_SECONDS,
        resumers: Mapping[str, Resumer] = {},
    ) -> None:
        self._assembler = assembler
        self._resumers = dict(resumers)  # by Continuation.kind: who carries a suspended turn on
        self._attachments = attachments
        self._model = model
        self._history = history
        self._inbox = inbox
        self._outbox = outbox
        self._memory = memory
        self._tools_for = tools_for
        self._settings = settings
        self._policies = policies
        self._budgets = budgets
        self._caps = caps
        self._schedules = schedules
        self._operators = operators
        self._closing = asyncio.Event()  # set with _closed: wakes waits to retry (publish, parts)
        self._delivery = Delivery(outbox, deliverers, self._closing)
        # Platforms whose stored requests leave names to look up at turn time.
        self._completers = dict(completers or {})
        self._lanes: Lanes[_Job, TurnResult] = Lanes(
            self._work,
            depth=settings.queue_per_conversation,
            cancelled=lambda job: TurnResult(job.turn_id, Outcome.CANCELLED),
        )
        self._model_calls = asyncio.Semaphore(settings.max_concurrent_turns)
        self._rate = PersonRate(settings.turns_per_person_per_minute, clock)
        self._notices = PersonRate(REFUSAL_NOTICES_PER_MINUTE, clock)
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        # Until `resume()` has queued what an earlier process left, accepted items wait here so
        # that they run after it, in the order they were accepted.
        self._resumed = False
        self._held: list[InboxItem] = []
        self._share = share
        self._sweep_seconds = sweep_seconds
        self._sweeper: asyncio.Task[None] | None = None
        self._adopting: dict[str, tuple[asyncio.Lock, int]] = {}
        # The task running each conversation's current turn, and the turns a person stopped.
        self._running: dict[str, tuple[str, asyncio.Task[Any]]] = {}
        self._stopped: set[str] = set()
        self.observers: list[Callable[[TurnRecord], None]] = []

    @property
    def queue_depth(self) -> int:
        return self._lanes.depth

    @property
    def draining(self) -> bool:
        """True from the moment shutdown begins: intake refused, running turns finishing."""
        return self._closed

    # --- intake -----------------------------------------------------------------------------

    async def submit(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> Admission:
        """Store the turn in the inbox, then queue it; refusals answer the person politely."""
        if self._closed:
            return Admission.CLOSED
        trace = _open_trace(request)
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
        try:
            item = await self._inbox.accept(request, source=source, marks=marks, consumes=consumes)
        except Exception as exc:  # not stored: the channel must not acknowledge
            log.warning("inbox_unavailable", error=type(exc).__name__, detail=str(exc))
            return Admission.UNAVAILABLE
        if item is None:
            log.info("event_duplicate", conversation_key=request.conversation_key)
            return Admission.DUPLICATE
        if self._share is not None:
            if not self._resumed or self._closed:
                trace.end()  # its run opens a trace of its own
                return Admission.ACCEPTED  # stored: the start-up sweep, or another replica, runs it
            return await self._adopt(request.conversation_key, fresh=item.item_id, trace=trace)
        if not self._resumed or self._closed:
            # Stored: it runs after what `resume()` queues, or after the next start.
            trace.end()  # its run opens a trace of its own
            self._held.append(item)
            return Admission.ACCEPTED
        return self._admit(_Job(request, item.item_id, trace=trace))[0]

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        if self._closed:
            raise IntakeUnavailable("the host is shutting down", closing=True)
        try:
            return await self._inbox.note(source=source, marks=marks, chatter=chatter)
        except Exception as exc:
            log.warning("inbox_unavailable", error=type(exc).__name__, detail=str(exc))
            raise IntakeUnavailable(type(exc).__name__) from None

    async def run(self, request: TurnRequest) -> TurnResult:
        """Queue a turn (not from the inbox) and wait until it is published and delivered."""
        if self._closed:
            return TurnResult(request.turn_id, Outcome.CLOSED)
        trace = _open_trace(request)
        with trace.active(), tracing.span("intake", bot__source=request.channel):
            admission, future = self._admit(_Job(request, trace=trace))
        if future is None:
            return TurnResult(request.turn_id, Outcome(admission.value))
        return await future

    async def cancel(self, conversation_key: str) -> bool:
        """A person stopped the conversation's running turn (Slack's stop button, a second Ctrl-C
        in `bot chat`): its model call is abandoned, nothing more of its answer is shown, the
        turn ends with a short note where its answer was, and the conversation keeps its
        continuity account (the same path a turn cancelled at shutdown takes when it will not run
        again). False when no turn of that conversation is running here."""
        running = self._running.get(conversation_key)
        if running is None:
            return False
        turn_id, task = running
        if turn_id in self._stopped:
            return True  # already stopping (a second press): cancelling twice would look like
            # shutdown to `_turn`
        self._stopped.add(turn_id)
        task.cancel()
        log.info("turn_stop_requested", turn_id=turn_id, conversation_key=conversation_key)
        return True

    async def command(self, request: TurnRequest) -> str:
        """A host command sent beside the conversation rather than into it (Slack's slash
        commands): `/memory`, `/forget N|all`, `/usage` or `/schedules [remove ID]`, answered here
        from the person's own data (and the place's schedules) in the request's scope, with no
        model call, nothing kept in history and no lane (it waits for no turn). The reply is the
        person's alone; the channel shows it privately."""
        if is_memory_command(request.text):
            scope = memory_scope(request)
            return await memory_commands.answer(request.text, request.person, scope, self._memory)
        if _first_word(request.text) == "/usage":
            return await self._usage(request)
        if schedule_commands.is_schedules_command(request.text):
            if self._schedules is None:
                return replies.SCHEDULES_OFF
            return await schedule_commands.answer(
                request.text, request, self._schedules, self._operators
            )
        return replies.COMMAND_UNKNOWN

    async def _usage(self, request: TurnRequest) -> str:
        person = request.person
        if self._budgets is not None and request.kind is ConversationKind.CONSOLE:
            # Nobody at a terminal is known by name: what this conversation used.
            here = await self._budgets.spent_here(request, datetime.now(UTC))
            return replies.console_usage(here.tokens, here.cost_usd)
        if person is None or self._budgets is None:
            return replies.USAGE_UNKNOWN
        mine = await self._budgets.personal(person, datetime.now(UTC))
        spent = mine.spent
        return replies.usage_report(
            spent.tokens, spent.cost_usd, mine.token_limit, mine.usd_limit, mine.resets_at
        )

    def _admit(self, job: _Job) -> tuple[Admission, asyncio.Future[TurnResult] | None]:
        request = job.request
        assert request is not None
        # A continuation is no new message: its decision is taken, so it is never refused.
        if request.continues is None and not self._rate.allow(request.person):
            log.info("turn_rate_limited", conversation_key=request.conversation_key)
            self._refuse_later(job, replies.TOO_FAST, Admission.RATE_LIMITED)
            return Admission.RATE_LIMITED, None
        try:
            future = self._lanes.put(
                request.conversation_key, job, bounded=request.continues is None
            )
        except LaneFull:
            log.info("turn_busy", conversation_key=request.conversation_key)
            self._refuse_later(job, replies.BUSY, Admission.BUSY)
            return Admission.BUSY, None
        return Admission.ACCEPTED, future

    async def resume(self) -> None:
        """Queue what an earlier process left: undelivered parts first, then every pending
        inbox item in the order it was accepted (each conversation's lane keeps that order).
        Replicas adopt what no live replica owns, now and every `sweep_seconds` from now on."""
        if self._share is not None:
            self._resumed = True
            await self._sweep_once()
            self._sweeper = asyncio.create_task(self._sweep(), name="host-share-sweep")
            return
        leftovers: dict[str, list[OutboxPart]] = {}
        for part in await self._outbox.undelivered():
            leftovers.setdefault(part.conversation_key, []).append(part)
        found = await self._inbox.pending()
        # From here to the end nothing awaits, so no accepted item can slip between the two.
        for key, parts in leftovers.items():
            self._lanes.put(key, _Job(None, leftovers=tuple(parts)), bounded=False)
        known = {item.item_id for item in found}
        mine = {item.item_id for item in self._held}  # accepted by this process: never ran
        for item in found:
            job = _Job(item.request, item.item_id, resumed=item.item_id not in mine)
            self._lanes.put(item.request.conversation_key, job, bounded=False)
        for item in self._held:
            if item.item_id not in known:
                job = _Job(item.request, item.item_id)
                self._lanes.put(item.request.conversation_key, job, bounded=False)
        self._held = []
        self._resumed = True
        if found or leftovers:
            log.info("host_resumed", items=len(found), parts=sum(map(len, leftovers.values())))

    async def idle(self) -> None:
        """Return when every lane is empty and every background task has finished."""
        await self._lanes.idle()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def close(self, grace: float | None = None) -> None:
        """Stop intake, let running turns finish up to `grace` (cancel the rest: they run again
        after the next start), then post what is left in the outbox."""
        self._closed = True
        self._closing.set()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self._lanes.close(self._settings.shutdown_grace if grace is None else grace)
        await self.idle()
        try:
            report = await asyncio.wait_for(self._delivery.drain(), OUTBOX_DRAIN_SECONDS)
        except Exception as exc:  # what is left is posted after the next start
            log.warning("outbox_drain_unfinished", error=type(exc).__name__)
        else:
            if report.parts:
                log.info("outbox_drained", parts=report.parts, accepted=report.accepted)

    # --- replicas: adopting conversations ----------------------------------------------------

    async def _adopt(
        self, key: str, fresh: int | None = None, trace: tracing.TurnTrace = tracing.NO_TURN
    ) -> Admission:
        """Adopt the conversation's unowned work and queue it on its lane in accepted order:
        parts a gone replica left first, then items. `fresh` (the item just accepted here) is
        admitted like any new turn; the rest is work taken on, never refused."""
        assert self._share is not None
        lock, users = self._adopting.get(key, (asyncio.Lock(), 0))
        self._adopting[key] = (lock, users + 1)
        try:
            async with lock:  # adoptions of one conversation reach its lane in commit order
                adopted = await self._share.adopt(key)
                admission = Admission.ACCEPTED
                if adopted.parts:
                    self._lanes.put(key, _Job(None, leftovers=adopted.parts), bounded=False)
                for item in adopted.items:
                    if item.item_id == fresh:
                        job = _Job(item.request, item.item_id, trace=trace)
                        admission = self._admit(job)[0]
                        continue
                    resumed = item.item_id in adopted.resumed
                    job = _Job(item.request, item.item_id, resumed=resumed)
                    self._lanes.put(key, job, bounded=False)
                return admission
        except Exception as exc:  # stored: the next sweep (here or on a replica) adopts it
            log.warning("adopt_failed", conversation_key=key, error=type(exc).__name__)
            return Admission.ACCEPTED
        finally:
            lock, users = self._adopting[key]
            if users == 1:
                del self._adopting[key]
            else:
                self._adopting[key] = (lock, users - 1)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_seconds)
            await self._sweep_once()

    async def _sweep_once(self) -> None:
        """Adopt conversations no live replica owns work in."""
        assert self._share is not None
        try:
            keys = await self._share.orphaned(SHARE_SWEEP_LIMIT)
        except Exception as exc:  # the database is away: try again at the next sweep
            log.warning("share_sweep_failed", error=type(exc).__name__)
            return
        for key in keys:
            if self._closed:
                return
            await self._adopt(key)

    # --- the turn pipeline ------------------------------------------------------------------

    async def _work(self, job: _Job) -> TurnResult:
        result = await self._work_one(job)
        if self._share is None or self._closed or (job.item_id is None and not job.leftovers):
            return result
        key = job.leftovers[0].conversation_key if job.leftovers else job.request_key
        if not self._lanes.waiting(key):  # done with what it owned: take on what came since
            await self._adopt(key)
        return result

    async def _work_one(self, job: _Job) -> TurnResult:
        if job.request is None:
            report = await self._delivery.leftovers(job.leftovers)
            return TurnResult(job.turn_id, Outcome.OK if report.delivered else Outcome.UNDELIVERED)
        trace = job.trace if job.trace is not tracing.NO_TURN else _open_trace(job.request)
        with (
            trace.active(end=True),
            structlog.contextvars.bound_contextvars(
                turn_id=job.request.turn_id, conversation_key=job.request.conversation_key
            ),
        ):
            if job.resumed and job.item_id is not None and await self._gave_up(job):
                return TurnResult(job.turn_id, Outcome.CRASHED, error="interrupted too often")
            request = await self._completed(job.request)
            return await self._turn(replace(job, request=request), request)

    async def _completed(self, request: TurnRequest) -> TurnRequest:
        """The request with the names its channel left for the turn to look up (Slack's)."""
        lookups = request.lookups
        completer = self._completers.get(request.channel) if lookups is not None else None
        if lookups is None or completer is None:
            return request
        try:
            return request.named(await completer.look_up(lookups))
        except Exception:  # the stored request is readable as it is
            log.exception("request_completion_failed")
            return request

    async def _turn(self, job: _Job, request: TurnRequest) -> TurnResult:
        started = datetime.now(UTC)
        try:
            return await self._turn_inner(job, request, started)
        except asyncio.CancelledError:
            log.info("turn_cancelled")
            task = asyncio.current_task()
            if request.turn_id not in self._stopped or task is None or task.cancelling() > 1:
                raise  # shutdown (as well): the lane goes down
            task.uncancel()  # a person's stop ends this turn only; the lane runs on
            return TurnResult(request.turn_id, Outcome.CANCELLED, error=STOPPED)
        except Exception as exc:  # the host keeps running whatever one turn does
            log.exception("turn_crashed", error=type(exc).__name__)
            return await self._crashed(job, request, started, type(exc).__name__)
        finally:
            self._stopped.discard(request.turn_id)

    @contextlib.contextmanager
    def _stoppable(self, request: TurnRequest) -> Iterator[None]:
        """While the model call runs (or waits for its slot), `cancel` may stop it; not before
        (the turn is still being prepared) nor after (its answer is being published and
        delivered whole)."""
        task = asyncio.current_task()
        assert task is not None
        key = request.conversation_key
        self._running[key] = (request.turn_id, task)
        try:
            yield
        finally:
            if self._running.get(key, ("",))[0] == request.turn_id:
                del self._running[key]

    async def _turn_inner(self, job: _Job, request: TurnRequest, started: datetime) -> TurnResult:
        if request.continues is not None:  # a suspended turn carries on, here in its lane
            resumer = self._resumers.get(request.continues.kind)
            if resumer is None:
                error = f"no resumer for {request.continues.kind!r} continuations"
                record = self._record(request, started, Outcome.FAILED, error=error)
                return await self._conclude(job, record, InboxState.FAILED, say=replies.TURN_FAILED)
            async with self._working(request.route):
                note = await resumer.resume(request, request.continues)
            request = replace(request, text=note)  # what the model reads of the outcome
        text = request.text
        if is_memory_command(text):  # the person's own memory: answered here, never the model,
            return await self._memory_command(job, request, started)  # nor refused for budget
        if _first_word(text) == "/usage":  # likewise; said only where nobody else reads it
            private = request.kind is ConversationKind.CONSOLE or (
                request.surface is not None and request.surface.kind is SurfaceKind.DM
            )
            say = await self._usage(request) if private else replies.USAGE_PRIVATE
            record = self._record(request, started, Outcome.COMMAND, details={"command": "usage"})
            return await self._conclude(job, record, InboxState.REFUSED, say=say)
        if self._schedules is not None and schedule_commands.is_schedules_command(text):
            return await self._schedules_command(job, request, started, self._schedules)
        policy = self._policy(request)
        refused = await self._over_budget(job, request, policy, started)
        if refused is not None:
            return refused
        command = host_command(text)
        if command == "compact":
            async with self._working(request.route):
                return await self._compact(job, request, started)
        if command is not None:  # /start, /help: answered by the host, no model call
            agent = self._assembler.agent
            listed = [(skill.name, skill.description) for skill in agent.skills]
            say = (
                replies.greeting(agent.identity)
                if command == "start"
                else replies.help_text(listed, schedules=self._schedules is not None)
            )
            record = self._record(request, started, Outcome.COMMAND)
            return await self._conclude(job, record, InboxState.REFUSED, say=say)
        try:
            words = self._assembler.words(request)
        except UnknownSkill as exc:
            record = self._record(request, started, Outcome.REFUSED, error="unknown_skill")
            return await self._conclude(job, record, InboxState.REFUSED, say=str(exc))
        return await self._model_turn(job, request, surface_prompt(policy), words, started)

    async def _model_turn(
        self, job: _Job, request: TurnRequest, surface: SurfacePrompt, words: str, started: datetime
    ) -> TurnResult:
        """Recall, prepare the prompt once, then call the model and publish what it said."""
        with tracing.span("recall") as recalled:
            history = await self._history.load(request.conversation_key)
            attached = await self._attached(request, history)
            recall = RecallCache(
                self._memory,
                memory_scope(request),
                request_holds(request, history),
                render=self._assembler.recalled_block,
            )
            hits = await recall.recall(words) if self._memory is not None else []
            tools = self._tools_for(request, recall, self._policy(request).rule)
            surface = replace(surface, tools=tuple(tool.spec for tool in tools))
            prepared = self._assembler.prepare(
                request, history, hits, surface=surface, attached=attached
            )
            recalled.set(bot__history_entries=len(history), bot__memory_hits=len(hits))
        self._log_context(request)
        stream = self._stream(job, request)
        heard = _Heard(stream.on_text if stream is not None else None)
        plan = TurnPlan(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            history=history,
            prompt=prepared.prompt,
            builder=self._assembler,
            tools=tools,
            on_text=heard.on_text if heard.streams else None,  # None: the call need not stream
            breakers=await self._caps.breakers(request, self._budgets, started),
        )
        # The progress sign (reaction, typing) stays up until the answer shows: posted, or its
        # stream opened (the deliverer takes the sign down then).
        async with self._working(request.route):
            return await self._call_and_publish(
                job, request, plan, prepared.user_entry, started, attached.problems, stream, heard
            )

    async def _attached(self, request: TurnRequest, history: Sequence[HistoryEntry]) -> Attached:
        """This turn's attachments, read; a file that was not read is told to the person, one
        line each, ahead of the answer (the rest of the message is still answered)."""
        if self._attachments is None:
            return Attached()
        return await self._attachments.take(request, history)

    async def _call_and_publish(
        self,
        job: _Job,
        request: TurnRequest,
        plan: TurnPlan,
        user_entry: HistoryEntry,
        started: datetime,
        notice: Sequence[str],
        stream: AnswerStream | None,
        heard: _Heard | None = None,
    ) -> TurnResult:
        charged: list[Usage] = []  # what calls that ended without an answer may have cost
        plan = replace(plan, on_charge=charged.append)
        try:
            with self._stoppable(request):  # also while it waits for a model call slot
                async with self._model_calls:
                    try:
                        outcome = await self._model.run(plan)
                    finally:  # what the stream showed is finished by delivery, after publication
                        if stream is not None:
                            job = replace(job, live=await stream.close())
        except WindowExceeded as exc:
            # The floors alone do not fit the window: unmet by definition.
            details = {"floor_unmet": True}
            record = self._record(
                request, started, Outcome.REFUSED, error=exc.code, details=details
            )
            return await self._conclude(job, record, InboxState.REFUSED, say=replies.TOO_LARGE)
        except BreakerTripped as stopped:
            record = self._record(
                request,
                started,
                Outcome.STOPPED,
                error=f"{stopped.code}: {stopped}",
                request_body=stopped.spend.request,
                usage=stopped.spend.usage,
                attempts=stopped.spend.attempts,
                details=_budget_details(stopped.spend.budget)
                | _tool_details(stopped.spend.tool_calls),
            )
            account = continuity_account(user_entry, stopped.partial_text, str(stopped))
            say = _noted(notice, stopped.reply or replies.TURN_FAILED)
            return await self._conclude(job, record, InboxState.FAILED, say=say, entries=account)
        except TurnFailed as failure:
            record = self._record(
                request,
                started,
                Outcome.FAILED,
                error=str(failure),
                request_body=failure.spend.request,
                usage=failure.spend.usage,
                attempts=failure.spend.attempts,
                details=_budget_details(failure.spend.budget)
                | _tool_details(failure.spend.tool_calls),
            )
            user_entry, notice = await self._left_out(
                request, plan, user_entry, notice, failure.spend.left_out
            )
            account = continuity_account(user_entry, failure.partial_text, str(failure))
            say = _noted(notice, failure.reply or replies.TURN_FAILED)
            return await self._conclude(job, record, InboxState.FAILED, say=say, entries=account)
        except asyncio.CancelledError:
            partial = heard.text if heard is not None else ""
            spent = sum(charged, Usage())
            await asyncio.shield(self._cancelled(job, request, user_entry, started, partial, spent))
            raise
        user_entry, notice = await self._left_out(
            request, plan, user_entry, notice, outcome.left_out
        )
        return await self._answered(job, request, outcome, user_entry, started, notice)

    async def _left_out(
        self,
        request: TurnRequest,
        plan: TurnPlan,
        user_entry: HistoryEntry,
        notice: Sequence[str],
        left_out: Sequence[LeftOut],
    ) -> tuple[HistoryEntry, Sequence[str]]:
        """Attachment content the model calls went without: a line for the person about each
        file, and content the API refused kept out of this conversation's replays for good."""
        if not left_out:
            return user_entry, notice
        refused = leftout.refused_ids(left_out)
        if refused and self._attachments is not None:
            await self._attachments.forget(request.conversation_key, refused)
        lines = leftout.notice_lines(left_out, user_entry, plan.history)
        return leftout.marked(user_entry, refused), [*notice, *lines]

    async def _answered(
        self,
        job: _Job,
        request: TurnRequest,
        outcome: TurnOutcome,
        user_entry: HistoryEntry,
        started: datetime,
        notice: Sequence[str],
    ) -> TurnResult:
        """Publish and deliver the model's answer (nothing, for a silent request-driven turn),
        then remember the exchange."""
        entries = [user_entry, *without_recalled_words(outcome.entries)]
        if outcome.history is not None:
            entries = [*outcome.history, *entries]
        silent = request.kind is ConversationKind.REQUEST and outcome.text.strip() == SILENT_TOKEN
        result = Outcome.SILENT if silent else Outcome.OK
        details = _budget_details(outcome.budget) | _tool_details(outcome.tool_calls)
        if outcome.suspended and not silent:  # it waits (an approval): its continuation follows
            result = Outcome.SUSPENDED
            details["suspended"] = [{"kind": c.kind, "key": c.key} for c in outcome.suspended]
        record = self._record(
            request,
            started,
            result,
            request_body=outcome.request,
            usage=outcome.usage,
            attempts=outcome.attempts,
            details=details,
        )
        ended = await self._conclude(
            job,
            record,
            InboxState.SILENT if silent else InboxState.ANSWERED,
            say="" if silent else _noted(notice, outcome.text),
            answer=True,
            entries=entries,
            replaces=outcome.history is not None,
            capture=self._capture(request, user_entry, outcome.text),
        )
        return replace(ended, text=outcome.text)

    async def _compact(self, job: _Job, request: TurnRequest, started: datetime) -> TurnResult:
        history = await self._history.load(request.conversation_key)
        if not history:
            record = self._record(request, started, Outcome.COMPACTED)
            return await self._conclude(
                job, record, InboxState.ANSWERED, say=replies.NOTHING_TO_COMPACT
            )

        surface = surface_prompt(self._policy(request))
        plan = TurnPlan(
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            history=history,
            prompt=self._assembler.prepare(request, history, surface=surface).prompt,
            builder=self._assembler,
            compact_only=True,
        )
        try:
            async with self._model_calls:
                outcome = await self._model.run(plan)
        except TurnFailed as failure:
            record = self._record(request, started, Outcome.FAILED, error=str(failure))
            say = failure.reply or replies.TURN_FAILED
            return await self._conclude(job, record, InboxState.FAILED, say=say)
        record = self._record(request, started, Outcome.COMPACTED, usage=outcome.usage)
        return await self._conclude(
            job,
            record,
            InboxState.ANSWERED,
            say=outcome.text,
            answer=True,
            entries=outcome.history or (),
            replaces=outcome.history is not None,
        )

    async def _conclude(
        self,
        job: _Job,
        record: TurnRecord,
        state: InboxState,
        *,
        say: str = "",
        answer: bool = False,
        entries: Sequence[HistoryEntry] = (),
        replaces: bool = False,
        capture: MemoryCapture | None = None,
    ) -> TurnResult:
        """End the turn: publish history, the parts of what is said, the item's terminal state,
        the turn record, its usage charge and its memory `capture` in one transaction, then
        deliver. `say` is the agent's answer when `answer`, else a host-written notice (which
        request-driven turns never get)."""
        request = job.request
        assert request is not None
        if not answer and request.kind is ConversationKind.REQUEST:
            say = ""
        parts = await self._delivery.parts(
            request.turn_id,
            request.conversation_key,
            request.route,
            say,
            job.live,
            resumed=job.resumed,
        )
        publication = Publication(
            request.conversation_key,
            entries,
            replaces,
            parts,
            job.item_id,
            state,
            record,
            usage=self._budgets.entry(request, record) if self._budgets is not None else None,
            capture=capture,
        )
        # The charge is published with the turn, before delivery (which may wait on a
        # rate-limited platform): the calls are billed already, and a budget must see them.
        failure = await self._publish(publication)
        if failure is not None:  # the item stays pending: it runs again after the next start
            await self._charge(request, record)  # what this run's calls cost counts all the same
            return TurnResult(request.turn_id, Outcome.FAILED, error=f"publish: {failure}")
        delivery = await self._delivery.send(request.route, parts, reconcile=job.resumed)
        if delivery is not None:  # the stored record was written before; observers see this too
            record = replace(record, details={**record.details, "delivered": delivery.delivered})
        self._observe(record)
        outcome = Outcome.OK if record.outcome == Outcome.COMPACTED else record.outcome
        return TurnResult(request.turn_id, outcome, say, delivery, record.error)

    async def _publish(self, publication: Publication) -> str | None:
        """Publish, trying again with backoff while the host runs (a full disk may get space
        back; the conversation's later turns wait behind this one, so order holds). None once
        published; the error's name when the host began closing first."""
        wait = PUBLISH_RETRY_FIRST
        while True:
            try:
                await self._outbox.publish(publication)
                return None
            except ClaimLost:  # another replica took this one for gone and runs the item
                log.warning("turn_claim_lost", item=publication.item_id)
                return ClaimLost.__name__
            except Exception as exc:
                error = type(exc).__name__
                if self._closed:
                    log.warning("turn_publish_failed", error=error, detail=str(exc))
                    return error
                log.warning("turn_publish_retrying", error=error, detail=str(exc), wait=wait)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), wait)
            wait = min(wait * 2, PUBLISH_RETRY_MAX)

    async def _crashed(
        self, job: _Job, request: TurnRequest, started: datetime, error: str
    ) -> TurnResult:
        try:
            user_entry = self._assembler.user_entry(request)
        except Exception:  # the assembler itself may be what failed
            user_entry = HistoryEntry("user", (TextBlock(request.text),), at=request.received_at)
        record = self._record(request, started, Outcome.CRASHED, error=error)
        account = continuity_account(user_entry, "", "the host failed")
        return await self._conclude(
            job, record, InboxState.CRASHED, say=replies.TURN_FAILED, entries=account
        )

    async def _gave_up(self, job: _Job) -> bool:
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

    async def _cancelled(
        self,
        job: _Job,
        request: TurnRequest,
        user_entry: HistoryEntry,
        started: datetime,
        partial: str = "",
        usage: Usage | None = None,
    ) -> None:
        """A turn cut short. At shutdown past its grace, an inbox item stays pending and runs
        again after the next start, exactly as after a kill: nothing is published now, so the
        person gets one answer and history holds the turn once, with no continuity account
        beside it. A turn that will not run again (a person stopped it; console, cron) records
        that it did not complete, with what it had written, so the next turn is not left
        guessing; a stopped turn's item ends there and its answer's place says it was stopped.
        Either way what its calls cost (`usage`) is charged: the API bills a call cut short."""
        if request.turn_id in self._stopped:
            await self._stop(job, request, user_entry, started, partial, usage)
            return
        record = self._record(request, started, Outcome.CANCELLED, usage=usage)
        self._observe(record)
        await self._charge(request, record)  # the API bills a call cut short all the same
        if job.item_id is not None:
            log.info("turn_left_pending", reason="cancelled at shutdown")
            return
        account = continuity_account(user_entry, partial, "the turn was cancelled")
        try:
            await self._outbox.publish(
                Publication(request.conversation_key, account, record=record)
            )
        except Exception:
            log.exception("continuity_publish_failed", conversation_key=request.conversation_key)

    async def _stop(
        self,
        job: _Job,
        request: TurnRequest,
        user_entry: HistoryEntry,
        started: datetime,
        partial: str,
        usage: Usage | None,
    ) -> None:
        """A person stopped the turn: publish its continuity account, end its inbox item and
        finish what its stream showed with the stop note (nothing else is posted)."""
        record = self._record(request, started, Outcome.CANCELLED, error=STOPPED, usage=usage)
        account = continuity_account(user_entry, partial, "the person stopped it")
        say = replies.stopped(partial)
        await self._conclude(job, record, InboxState.STOPPED, say=say, entries=account)

    def _refuse_later(self, job: _Job, notice: str, why: Admission) -> None:
        """Close a refused turn without holding up the channel's intake (a rate-limited
        platform could make its notice wait a long time). Notices are rate-limited per person:
        someone flooding the bot gets one now and then, not one per message."""
        request = job.request
        assert request is not None
        say = notice if self._notices.allow(request.person) else ""

        async def refuse() -> None:
            with job.trace.active(end=True):  # the refused turn's trace ends with its notice
                record = self._record(request, datetime.now(UTC), Outcome.REFUSED, error=why.value)
                await self._conclude(job, record, InboxState.REFUSED, say=say)

        self._in_background(refuse())

    # --- surface policy and budgets ----------------------------------------------------------

    def _policy(self, request: TurnRequest) -> SurfacePolicy:
        return self._policies.for_request(request) if self._policies is not None else NO_POLICY

    async def _memory_command(
        self, job: _Job, request: TurnRequest, started: datetime
    ) -> TurnResult:
        """/memory or /forget: the host answers from the speaker's own memory, at no token cost."""
        scope = memory_scope(request)
        console = request.kind is ConversationKind.CONSOLE
        reply = await memory_commands.answer(
            request.text, request.person, scope, self._memory, console=console
        )
        record = self._record(request, started, Outcome.OK, details={"command": "memory"})
        return await self._conclude(job, record, InboxState.ANSWERED, say=reply)

    async def _schedules_command(
        self, job: _Job, request: TurnRequest, started: datetime, store: ChatSchedules
    ) -> TurnResult:
        """/schedules: the jobs set up in chat here, answered by the host at no token cost."""
        reply = await schedule_commands.answer(request.text, request, store, self._operators)
        record = self._record(request, started, Outcome.COMMAND, details={"command": "schedules"})
        return await self._conclude(job, record, InboxState.ANSWERED, say=reply)

    async def _over_budget(
        self, job: _Job, request: TurnRequest, policy: SurfacePolicy, started: datetime
    ) -> TurnResult | None:
        """Refuse the turn before any model call when a budget is reached; the first refusal
        of a budget on a day tells the person, the rest stay quiet."""
        if self._budgets is None:
            return None
        refusal = await self._budgets.check(request, policy.budget, started)
        if refusal is None:
            return None
        log.info("turn_over_budget", budget=refusal.scope, notified=refusal.notify)
        reply = replies.budget_reached(refusal.scope, refusal.resets_at) if refusal.notify else ""
        record = self._record(
            request, started, Outcome.OVER_BUDGET, error=f"budget:{refusal.scope}"
        )
        result = await self._conclude(job, record, InboxState.REFUSED, say=reply)
        return replace(result, error=refusal.scope)

    # --- side effects -----------------------------------------------------------------------

    def _capture(
        self, request: TurnRequest, user_entry: HistoryEntry, answer: str
    ) -> MemoryCapture | None:
        """What long-term memory captures of an answered turn (with its publication). Not a
        continuation's: its text is a host note holding a tool's result, never remembered."""
        if self._memory is None or not answer.strip() or request.continues is not None:
            return None
        return MemoryCapture(
            conversation_key=request.conversation_key,
            surface=memory_scope(request).surface,
            person=request.person,
            speaker_label=user_entry.speaker,
            user_text=user_entry.text,
            answer=answer,
            at=request.received_at,
            turn_id=request.turn_id,
        )

    def _record(
        self,
        request: TurnRequest,
        started: datetime,
        outcome: Outcome,
        *,
        error: str | None = None,
        request_body: Mapping[str, object] | None = None,
        usage: Usage | None = None,
        attempts: int = 0,
        details: Mapping[str, object] | None = None,
    ) -> TurnRecord:
        return TurnRecord(
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
            details={**(details or {}), **self._where(request), **_trace_details()},
        )

    def _observe(self, record: TurnRecord) -> None:
        for observer in self.observers:
            observer(record)
        latency_ms = (record.finished_at - record.started_at).total_seconds() * 1000
        log.info(
            "turn_finished",
            turn_id=record.turn_id,
            conversation_key=record.conversation_key,
            outcome=record.outcome,
            latency_ms=round(latency_ms, 1),
            attempts=record.attempts,
            input_tokens=record.usage.input_tokens,
            cache_read_tokens=record.usage.cache_read_tokens,
            cache_write_tokens=record.usage.cache_write_tokens,
            output_tokens=record.usage.output_tokens,
        )

    async def _charge(self, request: TurnRequest, record: TurnRecord) -> None:
        """Count what a turn's calls cost when no publication carries it (one that could not be
        published, a turn cut short at shutdown): the API bills them all the same."""
        if self._budgets is None:
            return
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

    def _stream(self, job: _Job, request: TurnRequest) -> AnswerStream | None:
        """A live preview of the answer, for a conversation turn's first run (a run again after
        a crash shows nothing until its answer is whole: delivery then finishes or replaces
        what the first run showed). Request-driven turns never stream: their answer may be the
        silent token."""
        if job.resumed or request.kind is ConversationKind.REQUEST:
            return None
        return self._delivery.stream(request.turn_id, request.route)

    @contextlib.asynccontextmanager
    async def _working(self, route: ReplyRoute | None) -> AsyncIterator[None]:
        deliverer = self._delivery.deliverer(route.platform) if route else None
        if route is None or deliverer is None:
            yield
            return
        async with deliverer.working(route):
            yield

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Side work (captures, refusals) that `idle()` and `close()` wait for."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class _Heard:
    """The text the model has streamed so far in this turn (what a stopped turn's continuity
    account keeps), passed on to the turn's live preview."""

    def __init__(self, then: Callable[[str], Awaitable[None]] | None) -> None:
        self._then = then
        self._deltas: list[str] = []

    @property
    def streams(self) -> bool:
        return self._then is not None

    @property
    def text(self) -> str:
        return "".join(self._deltas)

    async def on_text(self, delta: str) -> None:
        self._deltas.append(delta)
        if self._then is not None:
            await self._then(delta)


def _first_word(text: str) -> str:
    words = text.split(maxsplit=1)
    return words[0].lower() if words else ""


def _open_trace(request: TurnRequest) -> tracing.TurnTrace:
    return tracing.open_turn(
        turn_id=request.turn_id, channel=request.channel, kind=request.kind.value
    )


def _trace_details() -> dict[str, object]:
    """The turn's trace id for its record, when traces are on."""
    found = tracing.trace_id()
    return {"trace_id": found} if found else {}


def _tool_details(calls: Sequence[Mapping[str, Any]]) -> dict[str, object]:
    """The turn's tool calls for its record (tool, arguments, result size, duration, outcome)."""
    return {"tool_calls": [dict(call) for call in calls]} if calls else {}


def _budget_details(budget: BudgetFacts | None) -> dict[str, object]:
    """The budget's facts for the turn record ({} when no request was assembled)."""
    return budget.details() if budget is not None else {}


def _noted(notice: Sequence[str], text: str) -> str:
    """What is said: the host's lines about files it could not read, then the answer."""
    return "\n".join(notice) + "\n\n" + text if notice else text


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
