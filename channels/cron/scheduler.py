"""The cron scheduler: fires each enabled job at its slots, one run of a job at a time.

Rules (SPEC §7):

- no overlap: a slot that comes while the job's previous run is still going is remembered, and
  run once when that run ends (if still within the grace); several such slots collapse into one;
- misfires: a slot noticed late (the host was down, asleep or busy) runs once if it is at most
  `cron.misfire_grace` seconds old, else it is skipped and logged; never a burst of old slots.
  After a restart the durable run records say which slots already ran;
- pauses: a job a cost breaker paused (durable, in the run records) skips its slots until
  `bot cron resume NAME`; a stopped run is never retried;
- retries: a failed turn is run again after a growing delay, at most `cron.retries` times and
  never past the job's next slot; an answer the platform took no part of is posted again rather
  than re-asked, and one it took only some parts of is not retried (that would repeat them).

Jobs set up in chat come from `source` (the store, shared by replicas): read at start, every
`refresh` seconds and at once when `changed()` is called; a job read late still gets the slots
that came since the previous read (within the grace). Slot claims make each slot run once.

Time comes from `now()` (aware datetimes) and waiting from `sleep(seconds)`, both injectable, so
tests drive the clock and never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from bot.ports.cron import CronRuns, CronRunStatus, CronTrigger
from channels.cron.plan import JobPlan
from channels.cron.runner import Clock, CronRunner, RunResult, utc_now

log = structlog.get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Source = Callable[[], Awaitable[Sequence[JobPlan]]]
REFRESH_SECONDS = 30.0
# The loop re-reads the clock at least this often, so a wall-clock step (NTP, suspend) is noticed.
MAX_NAP_SECONDS = 60.0
MAX_RETRY_DELAY_SECONDS = 3600.0
# A slot noticed this soon after its time is on time, whatever the grace (even a grace of 0):
# the loop always wakes a little after the instant it slept until.
ON_TIME = timedelta(seconds=1)
RETRY_GROWTH = 4.0


@dataclass(frozen=True, slots=True)
class SlotRules:
    """What becomes of a slot that is late or whose run failed (`[cron]`): a slot noticed at most
    `misfire_grace` seconds late still runs; a failed run is tried again up to `retries` times,
    the first after `retry_delay` seconds."""

    misfire_grace: float
    retries: int
    retry_delay: float


@dataclass
class _Job:
    plan: JobPlan
    next_fire: datetime
    task: asyncio.Task[None] | None = None
    pending: datetime | None = None  # a slot that came while the job was running
    backing_off: bool = False

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class CronScheduler:
    """Owns one loop task and at most one run task per job. `start()`, then `stop()`."""

    def __init__(
        self,
        jobs: Sequence[JobPlan],
        runner: CronRunner,
        runs: CronRuns,
        rules: SlotRules,
        *,
        now: Clock = utc_now,
        sleep: Sleep = asyncio.sleep,
        source: Source | None = None,
        refresh: float = REFRESH_SECONDS,
    ) -> None:
        self._plans = [job for job in jobs if job.enabled]
        self._source = source
        self._refresh = timedelta(seconds=refresh)
        self._sourced: set[str] = set()  # names of the jobs read from `source`
        self._read_at: datetime | None = None  # the last read that succeeded
        self._tried_at: datetime | None = None  # the last read, failed or not
        self._poked = asyncio.Event()
        self._runner = runner
        self._runs = runs
        self._grace = timedelta(seconds=rules.misfire_grace) + ON_TIME
        self._retries = rules.retries
        self._retry_delay = rules.retry_delay
        self._now = now
        self._sleep = sleep
        self._jobs: dict[str, _Job] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False

    def next_fire(self, name: str) -> datetime | None:
        job = self._jobs.get(name)
        return job.next_fire if job else None

    def running(self, name: str) -> bool:
        job = self._jobs.get(name)
        return bool(job and job.running)

    async def start(self) -> None:
        """Settle what the last process left, catch up at most one missed slot per job, loop."""
        now = self._now()
        stale = await self._runs.interrupt_running(now)
        if stale:
            log.warning("cron_runs_interrupted", runs=stale)
        for plan in self._plans:
            job = _Job(plan, plan.schedule.next_after(now))
            self._jobs[plan.name] = job
            missed = await self._missed_while_down(plan, now)
            if missed is not None:
                self._fire(job, missed, CronTrigger.CATCH_UP)
        await self._read_source(now)
        self._loop_task = asyncio.create_task(self._loop(), name="cron-scheduler")
        log.info(
            "cron_started",
            jobs={name: job.next_fire.isoformat() for name, job in self._jobs.items()},
        )

    async def stop(self, grace: float = 30.0) -> None:
        """No new runs; runs in flight get `grace` seconds to finish, then are cancelled."""
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = self._in_flight()
        for job in self._jobs.values():
            if job.backing_off and job.task is not None:
                job.task.cancel()  # waiting to retry is not work in flight
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        log.info("cron_stopped")

    async def idle(self) -> None:
        """Return when no run of any job is in flight (tests, `bot cron` tooling)."""
        while tasks := self._in_flight():
            await asyncio.gather(*tasks, return_exceptions=True)

    def _in_flight(self) -> list[asyncio.Task[None]]:
        return [job.task for job in self._jobs.values() if job.task and not job.task.done()]

    async def _missed_while_down(self, plan: JobPlan, now: datetime) -> datetime | None:
        last = await self._runs.last_slot(plan.name)
        if last is None:
            return None  # never ran here: nothing tells a downtime from a job just added
        missed = plan.schedule.latest_in(max(last, now - self._grace), now)
        if missed is None and plan.schedule.next_after(last) <= now:
            log.warning("cron_misfire_skipped", job=plan.name, reason="downtime longer than grace")
        return missed

    def changed(self) -> None:
        """The source's jobs changed (one was set up or removed here): read them now."""
        self._poked.set()

    async def _read_source(self, now: datetime) -> None:
        """Add the source's new jobs and drop its removed ones (a run in flight finishes)."""
        if self._source is None:
            return
        self._tried_at = now  # a failed read is tried again at the next refresh, not at once
        try:
            plans = [plan for plan in await self._source() if plan.name not in self._configured]
        except Exception as exc:  # the store is away: keep what was read, try again later
            log.warning("cron_source_failed", error=type(exc).__name__)
            return
        since, self._read_at = self._read_at, now
        names = {plan.name for plan in plans}
        for name in self._sourced - names:
            self._jobs.pop(name, None)
            log.info("cron_job_removed", job=name)
        for plan in plans:
            if plan.name in self._jobs:
                continue
            # Read late, a job still gets the slots since the last read, never one before it
            # was set up; the first read (at start) looks forward only, like configured jobs.
            start = now if since is None else max(since, plan.since or since)
            job = _Job(plan, plan.schedule.next_after(start))
            self._jobs[plan.name] = job
            if since is None and (missed := await self._missed_while_down(plan, now)):
                self._fire(job, missed, CronTrigger.CATCH_UP)
            log.info("cron_job_added", job=plan.name, next_fire=job.next_fire.isoformat())
        self._sourced = names

    def _due_to_read(self, now: datetime) -> bool:
        if self._source is None:
            return False
        stale = self._tried_at is None or now - self._tried_at >= self._refresh
        return stale or self._poked.is_set()

    @property
    def _configured(self) -> set[str]:
        return {plan.name for plan in self._plans}

    async def _loop(self) -> None:
        while True:
            now = self._now()
            if self._due_to_read(now):
                self._poked.clear()
                await self._read_source(now)
            for job in list(self._jobs.values()):
                if job.next_fire <= now:
                    self._due(job, now)
            if not self._jobs and self._source is None:
                return
            wakes = [job.next_fire for job in self._jobs.values()]
            if self._source is not None and self._tried_at is not None:
                wakes.append(self._tried_at + self._refresh)
            wake = min(wakes)
            await self._nap(min(max((wake - now).total_seconds(), 0.0), MAX_NAP_SECONDS))

    async def _nap(self, seconds: float) -> None:
        """Sleep `seconds`, or less when `changed()` is called meanwhile."""
        if self._source is None:
            await self._sleep(seconds)
            return
        nap = asyncio.ensure_future(self._sleep(seconds))
        poke = asyncio.ensure_future(self._poked.wait())
        try:
            await asyncio.wait({nap, poke}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (nap, poke):
                task.cancel()
            await asyncio.gather(nap, poke, return_exceptions=True)

    def _due(self, job: _Job, now: datetime) -> None:
        schedule, first = job.plan.schedule, job.next_fire
        job.next_fire = schedule.next_after(now)
        # Only the latest slot within the grace can still run; older ones are never replayed.
        slot = schedule.latest_in(max(first - timedelta(microseconds=1), now - self._grace), now)
        if slot is None:
            log.warning("cron_misfire_skipped", job=job.plan.name, slot=first.isoformat())
            return
        if slot != first:
            log.warning("cron_slots_collapsed", job=job.plan.name, kept=slot.isoformat())
        self._fire(job, slot, CronTrigger.SCHEDULE)

    def _fire(self, job: _Job, slot: datetime, trigger: CronTrigger) -> None:
        if job.running:
            job.pending = slot
            log.info("cron_overlap_deferred", job=job.plan.name, slot=slot.isoformat())
            return
        job.task = asyncio.create_task(
            self._serve(job, slot, trigger), name=f"cron:{job.plan.name}"
        )

    async def _serve(self, job: _Job, slot: datetime, trigger: CronTrigger) -> None:
        """Run the slot (with retries), then the one slot that came meanwhile, if still fresh."""
        current: datetime | None = slot
        while current is not None and not self._stopping:
            if await self._paused(job.plan.name):
                log.info("cron_slot_skipped_paused", job=job.plan.name, slot=current.isoformat())
            elif await self._runs.claim_slot(job.plan.name, current):
                await self._attempts(job, current, trigger)
            else:
                log.info("cron_slot_claimed_elsewhere", job=job.plan.name, slot=current.isoformat())
            current, job.pending = job.pending, None
            trigger = CronTrigger.CATCH_UP
            if current is not None and self._now() - current > self._grace:
                log.warning("cron_misfire_skipped", job=job.plan.name, slot=current.isoformat())
                current = None

    async def _paused(self, name: str) -> bool:
        try:
            return any(pause.job == name for pause in await self._runs.paused())
        except Exception as exc:  # the store is away: run; a breaker still stops a bad run
            log.warning("cron_pause_check_failed", job=name, error=type(exc).__name__)
            return False

    async def _attempts(self, job: _Job, slot: datetime, trigger: CronTrigger) -> None:
        plan = job.plan
        result = await self._runner.run(plan.run, plan.prompt, trigger=trigger, scheduled_for=slot)
        for attempt in range(2, self._retries + 2):
            retry = _retry_kind(result)
            if retry is None or self._stopping:
                return
            delay = min(self._retry_delay * RETRY_GROWTH ** (attempt - 2), MAX_RETRY_DELAY_SECONDS)
            if self._now() + timedelta(seconds=delay) >= job.next_fire:
                log.info("cron_retry_abandoned", job=plan.name, reason="next slot comes first")
                return
            log.info("cron_retry_scheduled", job=plan.name, attempt=attempt, delay=delay)
            job.backing_off = True
            try:
                await self._sleep(delay)
            finally:
                job.backing_off = False
            if retry is CronTrigger.REDELIVERY:
                result = await self._runner.redeliver(plan.run, result, attempt=attempt)
            else:
                result = await self._runner.run(
                    plan.run,
                    plan.prompt,
                    trigger=CronTrigger.RETRY,
                    scheduled_for=slot,
                    attempt=attempt,
                )


def _retry_kind(result: RunResult) -> CronTrigger | None:
    """What a retry should do, if anything: run the turn again, or only post its answer again."""
    record = result.record
    if record.status is CronRunStatus.FAILED and not (record.error or "").startswith("closed"):
        return CronTrigger.RETRY
    if record.status is CronRunStatus.UNDELIVERED and record.accepted == 0:
        return CronTrigger.REDELIVERY
    return None
