"""Where a host's turns come from: this process alone (`SingleProcess`), or replicas sharing one
store (`Replicas`, on a `WorkShare`, SPEC §13).

One process queues what it accepts at once, and on start (`resume`) what an earlier process left:
undelivered parts first, then every pending item in accepted order; until then, accepted items
are held so that they run after it. An item stored just before `resume` reads the inbox but not
yet handed over by its intake is waited for, so it is queued once, as this process's new turn
(queued twice, it would be answered twice, and its second publication refused).

Replicas do not run what they accept at once: they adopt the conversation, which succeeds only
when no other live replica owns work in it, and then run all of its pending items on their lane
in accepted order. A replica that finishes a conversation's work adopts what was accepted for it
meanwhile (by any replica), and every `sweep_seconds` each replica adopts the conversations
nobody live owns (left by a replica that died, or accepted while their owner was finishing), so
dead replicas' work is taken over while the others run, not only at their next start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import structlog

from bot import tracing
from bot.host.job import Job
from bot.host.lanes import Lanes
from bot.ports.intake import Admission, Inbox, InboxItem, TurnResult, WorkShare
from bot.ports.outbox import Outbox, OutboxPart

log = structlog.get_logger(__name__)

SHARE_SWEEP_SECONDS = 1.0  # replicas: how often to look for work no live replica owns
SHARE_SWEEP_LIMIT = 100  # conversations adopted per sweep at most

# Queue a new turn on its lane under the person's rate and the lane's depth (`intake.Gate`).
Admit = Callable[[Job], tuple[Admission, "asyncio.Future[TurnResult] | None"]]


class SingleProcess:
    """The work of a host that owns its store alone."""

    def __init__(
        self,
        inbox: Inbox,
        outbox: Outbox,
        lanes: Lanes[Job, TurnResult],
        admit: Admit,
        closing: asyncio.Event,
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._lanes = lanes
        self._admit = admit
        self._closing = closing
        # Until `resume()` has queued what an earlier process left, accepted items wait here so
        # that they run after it, in the order they were accepted.
        self._resumed = False
        self._held: list[InboxItem] = []
        self._accepting: set[asyncio.Future[None]] = set()  # intakes storing an item now

    @contextlib.asynccontextmanager
    async def accepting(self) -> AsyncIterator[None]:
        """Around one intake's storing of an item and its handing over (`accepted`): `resume()`
        waits for those under way when it reads the inbox (once it is done, nothing does)."""
        if self._resumed:
            yield
            return
        done = asyncio.get_running_loop().create_future()
        self._accepting.add(done)
        try:
            yield
        finally:
            self._accepting.discard(done)
            done.set_result(None)

    async def accepted(self, item: InboxItem, trace: tracing.TurnTrace) -> Admission:
        """Queue an item the inbox just stored."""
        if not self._resumed or self._closing.is_set():
            # Stored: it runs after what `resume()` queues, or after the next start.
            trace.end()  # its run opens a trace of its own
            self._held.append(item)
            return Admission.ACCEPTED
        return self._admit(Job(item.request, item.item_id, trace=trace))[0]

    async def resume(self) -> None:
        """Queue what an earlier process left: undelivered parts first, then every pending
        inbox item in the order it was accepted (each conversation's lane keeps that order)."""
        leftovers: dict[str, list[OutboxPart]] = {}
        for part in await self._outbox.undelivered():
            leftovers.setdefault(part.conversation_key, []).append(part)
        found = await self._inbox.pending()
        # An intake may have stored its item before that read and not handed it over yet: it is
        # this process's, new (held, run as such), not one an earlier process left, so it must
        # not be queued here and again when it comes. Each intake under way hands its item over
        # first (items stored after the read come to `_held` meanwhile, or are admitted later).
        if self._accepting:
            await asyncio.wait(list(self._accepting))
        # From here to the end nothing awaits, so no accepted item can slip between the two.
        for key, parts in leftovers.items():
            self._lanes.put(key, Job(None, leftovers=tuple(parts)), bounded=False)
        known = {item.item_id for item in found}
        mine = {item.item_id for item in self._held}  # accepted by this process: never ran
        for item in found:
            job = Job(item.request, item.item_id, resumed=item.item_id not in mine)
            self._lanes.put(item.request.conversation_key, job, bounded=False)
        for item in self._held:
            if item.item_id not in known:
                job = Job(item.request, item.item_id)
                self._lanes.put(item.request.conversation_key, job, bounded=False)
        self._held = []
        self._resumed = True
        if found or leftovers:
            log.info("host_resumed", items=len(found), parts=sum(map(len, leftovers.values())))

    async def finished(self, job: Job) -> None:
        """Nothing to take on: every item is queued when it is accepted or resumed."""

    async def gather(self, key: str) -> None:
        """Nothing to gather: every item accepted here is on its lane already."""

    async def close(self) -> None:
        """Nothing runs beside the lanes."""


class Replicas:
    """The work of one replica among several on a shared store."""

    def __init__(
        self,
        share: WorkShare,
        lanes: Lanes[Job, TurnResult],
        admit: Admit,
        closing: asyncio.Event,
        sweep_seconds: float = SHARE_SWEEP_SECONDS,
    ) -> None:
        self._share = share
        self._lanes = lanes
        self._admit = admit
        self._closing = closing
        self._sweep_seconds = sweep_seconds
        self._resumed = False
        self._sweeper: asyncio.Task[None] | None = None
        self._adopting: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def accepting(self) -> AsyncIterator[None]:
        """Around one intake's storing and handing over of an item: nothing to wait for (an
        item is run by whoever adopts its conversation, once)."""
        yield

    async def accepted(self, item: InboxItem, trace: tracing.TurnTrace) -> Admission:
        """Adopt the conversation of an item the inbox just stored (and so run it here), unless
        another live replica owns it."""
        if not self._resumed or self._closing.is_set():
            trace.end()  # its run opens a trace of its own
            return Admission.ACCEPTED  # stored: the start-up sweep, or another replica, runs it
        return await self._adopt(item.request.conversation_key, fresh=item.item_id, trace=trace)

    async def resume(self) -> None:
        """Adopt what no live replica owns, now and every `sweep_seconds` from now on."""
        self._resumed = True
        await self._sweep_once()
        self._sweeper = asyncio.create_task(self._sweep(), name="host-share-sweep")

    async def finished(self, job: Job) -> None:
        """Done with what it owned in the conversation: take on what was accepted since."""
        if self._closing.is_set() or (job.item_id is None and not job.leftovers):
            return
        key = job.conversation_key
        if not self._lanes.waiting(key):
            await self._adopt(key)

    async def gather(self, key: str) -> None:
        """Queue on `key`'s lane what was accepted for it meanwhile by any replica (this one runs
        its turn, so owns it): a running turn may take those messages in (`bot.host.busy`)."""
        if self._resumed and not self._closing.is_set():
            await self._adopt(key)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    async def _adopt(
        self, key: str, fresh: int | None = None, trace: tracing.TurnTrace = tracing.NO_TURN
    ) -> Admission:
        """Adopt the conversation's unowned work and queue it on its lane in accepted order:
        parts a gone replica left first, then items. `fresh` (the item just accepted here) is
        admitted like any new turn; the rest is work taken on, never refused."""
        lock, users = self._adopting.get(key, (asyncio.Lock(), 0))
        self._adopting[key] = (lock, users + 1)
        try:
            async with lock:  # adoptions of one conversation reach its lane in commit order
                adopted = await self._share.adopt(key)
                admission = Admission.ACCEPTED
                if adopted.parts:
                    self._lanes.put(key, Job(None, leftovers=adopted.parts), bounded=False)
                for item in adopted.items:
                    if item.item_id == fresh:
                        admission = self._admit(Job(item.request, item.item_id, trace=trace))[0]
                        continue
                    resumed = item.item_id in adopted.resumed
                    job = Job(item.request, item.item_id, resumed=resumed)
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
        try:
            keys = await self._share.orphaned(SHARE_SWEEP_LIMIT)
        except Exception as exc:  # the database is away: try again at the next sweep
            log.warning("share_sweep_failed", error=type(exc).__name__)
            return
        for key in keys:
            if self._closing.is_set():
                return
            await self._adopt(key)


# The host runs on one of the two.
WorkSource = SingleProcess | Replicas
