"""Cron and webhook run records (the `bot.ports.cron.CronRuns` port) on PostgreSQL, bounded like
the SQLite store's (`bot.store.sql.cron_runs`): the newest `keep_per_job` records of each job, none
older than `max_age_days`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.ports.cron import ChatSchedule, CronRun, CronRunStatus, JobPause
from bot.store.postgres.db import PgDatabase
from bot.store.sql.cron_runs import (
    COLUMNS,
    DEFAULT_KEEP_PER_JOB,
    DEFAULT_MAX_AGE_DAYS,
    INTERRUPTED_ERROR,
    SCHEDULE_COLUMNS,
    run_row,
    schedule_row,
    stored_pause,
    stored_run,
    stored_schedule,
    stored_time,
)

# Longer than any cron turn runs (model timeouts and retries included).
STALE_RUN_SECONDS = 30 * 60
_MARKS = ", ".join(f"${n}" for n in range(1, 13))
_UPDATES = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS.replace(" ", "").split(",")[1:])


class PgCronRuns:
    """Run records in the shared database."""

    def __init__(
        self,
        db: PgDatabase,
        *,
        keep_per_job: int = DEFAULT_KEEP_PER_JOB,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ) -> None:
        self._db = db
        self._keep = keep_per_job
        self._max_age = max_age_days * 86_400.0

    async def save(self, run: CronRun) -> None:
        row = list(run_row(run))
        row[8] = bool(row[8])  # delivered: a boolean column here

        async def save(conn: Any) -> None:
            await conn.execute(
                f"INSERT INTO cron_runs ({COLUMNS}) VALUES ({_MARKS}) "
                f"ON CONFLICT (run_id) DO UPDATE SET {_UPDATES}",
                *row,
            )

        await self._db.write(save)
        if run.status is not CronRunStatus.RUNNING:
            await self._prune(run.job, run.fired_at)

    async def latest(self, job: str) -> CronRun | None:
        rows = await self.recent(job, limit=1)
        return rows[0] if rows else None

    async def last_slot(self, job: str) -> datetime | None:
        found = await self._db.fetch_value(
            "SELECT max(scheduled_for) FROM cron_runs WHERE job = $1", (job,)
        )
        return stored_time(found)

    async def recent(self, job: str, limit: int = 20) -> list[CronRun]:
        rows = await self._db.fetch_all(
            f"SELECT {COLUMNS} FROM cron_runs WHERE job = $1 "
            "ORDER BY fired_at DESC, seq DESC LIMIT $2",
            (job, limit),
        )
        return [stored_run(row) for row in rows]

    async def interrupt_running(self, finished_at: datetime) -> int:
        """Mark interrupted the runs still `running` that no live replica can still be running
        (fired over STALE_RUN_SECONDS ago): a replica starting beside others must not mark
        theirs."""

        async def interrupt(conn: Any) -> int:
            status = await conn.execute(
                "UPDATE cron_runs SET status = $1, finished_at = $2, error = $3 "
                "WHERE status = $4 AND fired_at <= $5",
                CronRunStatus.INTERRUPTED.value,
                finished_at.timestamp(),
                INTERRUPTED_ERROR,
                CronRunStatus.RUNNING.value,
                finished_at.timestamp() - STALE_RUN_SECONDS,
            )
            return int(str(status).rsplit(" ", 1)[-1])

        return await self._db.write(interrupt)

    async def claim_slot(self, job: str, slot: datetime) -> bool:
        async def claim(conn: Any) -> bool:
            status = await conn.execute(
                "INSERT INTO cron_slots (job, slot, claimed_at) VALUES ($1, $2, $2) "
                "ON CONFLICT DO NOTHING",
                job,
                slot.timestamp(),
            )
            await conn.execute(
                "DELETE FROM cron_slots WHERE job = $1 AND slot < $2",
                job,
                slot.timestamp() - self._max_age,
            )
            return bool(status == "INSERT 0 1")

        return await self._db.write(claim)

    async def pause(self, job: str, reason: str, at: datetime) -> bool:
        async def pause(conn: Any) -> bool:
            status = await conn.execute(
                "INSERT INTO cron_pauses (job, reason, paused_at) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING",
                job,
                reason,
                at.timestamp(),
            )
            return bool(status == "INSERT 0 1")

        return await self._db.write(pause)

    async def resume(self, job: str) -> bool:
        async def resume(conn: Any) -> bool:
            status = await conn.execute("DELETE FROM cron_pauses WHERE job = $1", job)
            return bool(status == "DELETE 1")

        return await self._db.write(resume)

    async def paused(self) -> list[JobPause]:
        rows = await self._db.fetch_all(
            "SELECT job, reason, paused_at FROM cron_pauses ORDER BY paused_at, job", ()
        )
        return [stored_pause(row) for row in rows]

    async def add_schedule(self, schedule: ChatSchedule, *, per_place: int, per_person: int) -> str:
        async def add(conn: Any) -> str:
            # Replicas adding at once queue here, so a bound is never passed by a race.
            await conn.execute("LOCK TABLE chat_schedules IN SHARE ROW EXCLUSIVE MODE")
            places = await conn.fetchval(
                "SELECT count(*) FROM chat_schedules WHERE place = $1", schedule.place
            )
            if int(places) >= per_place:
                return "place"
            mine = await conn.fetchval(
                "SELECT count(*) FROM chat_schedules WHERE creator = $1", schedule.creator
            )
            if int(mine) >= per_person:
                return "person"
            await conn.execute(
                f"INSERT INTO chat_schedules ({SCHEDULE_COLUMNS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                *schedule_row(schedule),
            )
            return ""

        return await self._db.write(add)

    async def schedules(self, place: str | None = None) -> list[ChatSchedule]:
        if place is None:
            rows = await self._db.fetch_all(
                f"SELECT {SCHEDULE_COLUMNS} FROM chat_schedules ORDER BY created_at, id", ()
            )
        else:
            rows = await self._db.fetch_all(
                f"SELECT {SCHEDULE_COLUMNS} FROM chat_schedules WHERE place = $1 "
                "ORDER BY created_at, id",
                (place,),
            )
        return [stored_schedule(row) for row in rows]

    async def remove_schedule(self, schedule_id: str) -> bool:
        async def remove(conn: Any) -> bool:
            status = await conn.execute("DELETE FROM chat_schedules WHERE id = $1", schedule_id)
            return bool(status == "DELETE 1")

        return await self._db.write(remove)

    async def aclose(self) -> None:
        """The records share the store's pool, which the store closes."""

    async def _prune(self, job: str, now: datetime) -> None:
        async def prune(conn: Any) -> None:
            await conn.execute(
                "DELETE FROM cron_runs WHERE fired_at < $1", now.timestamp() - self._max_age
            )
            await conn.execute(
                """DELETE FROM cron_runs WHERE job = $1 AND run_id NOT IN (
                       SELECT run_id FROM cron_runs WHERE job = $1
                       ORDER BY fired_at DESC, seq DESC LIMIT $2)""",
                job,
                self._keep,
            )

        await self._db.write(prune)
