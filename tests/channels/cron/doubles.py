"""Test doubles for the ports the cron package talks to, and a clock that only tests move.

`ManualClock` replaces both `now()` and `sleep()`: sleepers wake when a test advances time past
their deadline, in deadline order, so nothing waits for real. `ScriptedSink` stands in for the host
(`TurnSink`), `RecordingDeliverer` for a channel's deliverer, `MemoryRuns` for the run records.
The end-to-end tests use the real host, store and fake platform servers instead.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from bot.errors import PartFailed
from bot.ports.cron import CronRun, CronRunStatus, JobPause
from bot.ports.delivery import Deliverer, DeliveryReport
from bot.ports.intake import Admission, TurnResult
from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute, TurnRequest


class ManualClock:
    def __init__(self, start: datetime) -> None:
        self._now = start
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deadline = self._now + timedelta(seconds=seconds)
        heapq.heappush(self._sleepers, (deadline, next(self._order), future))
        await future

    @property
    def sleepers(self) -> int:
        return sum(1 for *_, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline passes, in order."""
        target = self._now + timedelta(seconds=seconds)
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
            await settle()
        self._now = target
        await settle()

    def jump(self, seconds: float) -> None:
        """Move time without waking anyone: the process was suspended, or down."""
        self._now += timedelta(seconds=seconds)


async def settle(rounds: int = 20) -> None:
    """Let every ready task run until it blocks again (no real time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


DELIVERED = DeliveryReport(parts=1, accepted=1)


@dataclass
class Step:
    """How the fake host answers one turn."""

    outcome: str = "ok"
    text: str = "the answer"
    delivery: DeliveryReport | None = DELIVERED
    error: str | None = None
    hold: asyncio.Event | None = None  # the turn runs until the test sets it


@dataclass
class ScriptedSink:
    """A TurnSink double: records every request, answers from `script` (else `default`)."""

    script: deque[Step] = field(default_factory=deque)
    default: Step = field(default_factory=Step)
    requests: list[TurnRequest] = field(default_factory=list)
    started: asyncio.Queue[TurnRequest] = field(default_factory=asyncio.Queue)

    async def submit(self, request: TurnRequest) -> Admission:
        raise AssertionError("request-driven turns wait for their result: run(), not submit()")

    async def run(self, request: TurnRequest) -> TurnResult:
        self.requests.append(request)
        self.started.put_nowait(request)
        step = self.script.popleft() if self.script else self.default
        if step.hold is not None:
            await step.hold.wait()
        delivery = step.delivery if request.route is not None else None
        return TurnResult(request.turn_id, step.outcome, step.text, delivery, step.error)


@dataclass
class RecordingDeliverer(Deliverer):
    """A Deliverer double: top-level routes to `destination`, records what it posts (an
    answer is one part)."""

    platform: str = "slack"
    posted: list[tuple[ReplyRoute, str]] = field(default_factory=list)
    accept: bool = True

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        return [text]

    async def post(self, part: OutboxPart, first: str | None) -> str:
        if not self.accept:
            raise PartFailed("channel_not_found")
        self.posted.append((part.route, part.text))
        return part.part_id

    def route_to(self, destination: str) -> ReplyRoute:
        return ReplyRoute(self.platform, {"channel": destination})


@dataclass
class MemoryRuns:
    """The CronRuns port in memory."""

    runs: dict[str, CronRun] = field(default_factory=dict)
    slots: set[tuple[str, datetime]] = field(default_factory=set)
    pauses: dict[str, JobPause] = field(default_factory=dict)

    async def save(self, run: CronRun) -> None:
        self.runs[run.run_id] = run

    async def latest(self, job: str) -> CronRun | None:
        found = await self.recent(job, 1)
        return found[0] if found else None

    async def last_slot(self, job: str) -> datetime | None:
        slots = [r.scheduled_for for r in self.runs.values() if r.job == job and r.scheduled_for]
        return max(slots, default=None)

    async def recent(self, job: str, limit: int = 20) -> list[CronRun]:
        return list(reversed(self.of(job)))[:limit]

    async def interrupt_running(self, finished_at: datetime) -> int:
        stale = [r for r in self.runs.values() if r.status is CronRunStatus.RUNNING]
        for run in stale:
            self.runs[run.run_id] = replace(
                run, status=CronRunStatus.INTERRUPTED, finished_at=finished_at
            )
        return len(stale)

    async def claim_slot(self, job: str, slot: datetime) -> bool:
        claimed = (job, slot) not in self.slots
        self.slots.add((job, slot))
        return claimed

    async def pause(self, job: str, reason: str, at: datetime) -> bool:
        if job in self.pauses:
            return False
        self.pauses[job] = JobPause(job, reason, at)
        return True

    async def resume(self, job: str) -> bool:
        return self.pauses.pop(job, None) is not None

    async def paused(self) -> list[JobPause]:
        return sorted(self.pauses.values(), key=lambda p: (p.paused_at, p.job))

    def of(self, job: str) -> list[CronRun]:
        """Every record of `job`, oldest first."""
        # Ties on fired_at (the manual clock stands still during a run) keep insertion order.
        mine = [(r.fired_at, i, r) for i, r in enumerate(self.runs.values()) if r.job == job]
        return [r for *_, r in sorted(mine, key=lambda item: (item[0], item[1]))]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]
