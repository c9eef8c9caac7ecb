"""Cron and webhook run records and chat schedules of the in-memory store (ports:
`bot.ports.cron.CronRuns`, `ChatSchedules`), bounded as the SQL engines bound them
(`bot.store.sql.cron_runs`): the newest `keep_per_job` records of each job, none older than
`max_age_days`; a slot is claimed once, a pause is taken once, a schedule only within its bounds.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from bot.ports.cron import ChatSchedule, CronRun, CronRunStatus, JobPause
from bot.ports.stores import RunRecords
from bot.store.sql.cron_runs import DEFAULT_KEEP_PER_JOB, DEFAULT_MAX_AGE_DAYS, INTERRUPTED_ERROR
from bot.testing.tables import Opened


class MemoryCronRuns(RunRecords):
    """`bot.ports.stores.RunRecords` in memory."""

    def __init__(
        self,
        opened: Opened,
        *,
        keep_per_job: int = DEFAULT_KEEP_PER_JOB,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ) -> None:
        self._opened = opened
        self._keep = keep_per_job
        self._max_age = max_age_days * 86_400.0

    @property
    def _runs(self) -> dict[str, tuple[int, CronRun]]:
        return self._opened.tables.cron_runs

    async def save(self, run: CronRun) -> None:
        tables = self._opened.write("cron_runs")
        seq = self._runs[run.run_id][0] if run.run_id in self._runs else None
        self._runs[run.run_id] = (seq or tables.next_id("cron_runs"), run)
        if run.status is not CronRunStatus.RUNNING:
            self._prune(run.job, run.fired_at)

    async def latest(self, job: str) -> CronRun | None:
        found = await self.recent(job, limit=1)
        return found[0] if found else None

    async def last_slot(self, job: str) -> datetime | None:
        self._opened.check_open()
        slots = [
            run.scheduled_for
            for _, run in self._runs.values()
            if run.job == job and run.scheduled_for is not None
        ]
        return max(slots, default=None)

    async def recent(self, job: str, limit: int = 20) -> list[CronRun]:
        self._opened.check_open()
        runs = [(run.fired_at, seq, run) for seq, run in self._runs.values() if run.job == job]
        runs.sort(key=lambda found: (found[0], found[1]), reverse=True)
        return [run for *_, run in runs[:limit]]

    async def interrupt_running(self, finished_at: datetime) -> int:
        """Every record still running, as SQLite's one process does (PostgreSQL's replicas
        leave the recent ones: another replica may be running them)."""
        self._opened.write("cron_runs")
        running = [
            (seq, run) for seq, run in self._runs.values() if run.status is CronRunStatus.RUNNING
        ]
        for seq, run in running:
            stopped = replace(
                run,
                status=CronRunStatus.INTERRUPTED,
                finished_at=finished_at,
                error=INTERRUPTED_ERROR,
            )
            self._runs[run.run_id] = (seq, stopped)
        return len(running)

    async def claim_slot(self, job: str, slot: datetime) -> bool:
        tables = self._opened.write("cron_slots")
        at = slot.timestamp()
        claimed = (job, at) not in tables.cron_slots
        tables.cron_slots.setdefault((job, at), at)
        for old in [s for s in tables.cron_slots if s[0] == job and s[1] < at - self._max_age]:
            del tables.cron_slots[old]
        return claimed

    async def pause(self, job: str, reason: str, at: datetime) -> bool:
        tables = self._opened.write("cron_pauses")
        if job in tables.cron_pauses:
            return False
        tables.cron_pauses[job] = JobPause(job, reason, at)
        return True

    async def resume(self, job: str) -> bool:
        return self._opened.write("cron_pauses").cron_pauses.pop(job, None) is not None

    async def paused(self) -> list[JobPause]:
        self._opened.check_open()
        pauses = self._opened.tables.cron_pauses.values()
        return sorted(pauses, key=lambda p: (p.paused_at, p.job))

    async def add_schedule(self, schedule: ChatSchedule, *, per_place: int, per_person: int) -> str:
        tables = self._opened.write("chat_schedules")
        kept = tables.chat_schedules.values()
        if sum(1 for s in kept if s.place == schedule.place) >= per_place:
            return "place"
        if sum(1 for s in kept if s.creator == schedule.creator) >= per_person:
            return "person"
        tables.chat_schedules[schedule.id] = schedule
        return ""

    async def schedules(self, place: str | None = None) -> list[ChatSchedule]:
        self._opened.check_open()
        kept = self._opened.tables.chat_schedules.values()
        return sorted(
            (s for s in kept if place is None or s.place == place),
            key=lambda s: (s.created_at, s.id),
        )

    async def remove_schedule(self, schedule_id: str) -> bool:
        tables = self._opened.write("chat_schedules")
        return tables.chat_schedules.pop(schedule_id, None) is not None

    async def aclose(self) -> None:
        """The records share the store's tables, which the store closes."""

    def _prune(self, job: str, now: datetime) -> None:
        oldest = now.timestamp() - self._max_age
        for run_id in [
            r for r, (_, run) in self._runs.items() if run.fired_at.timestamp() < oldest
        ]:
            del self._runs[run_id]
        theirs = sorted(
            ((run.fired_at, seq, run.run_id) for seq, run in self._runs.values() if run.job == job),
            reverse=True,
        )
        for *_, run_id in theirs[self._keep :]:
            del self._runs[run_id]
