"""Durable cron and webhook run records (the `bot.ports.cron.CronRuns` port) in the store's file.

`SqliteCronRuns` works on one open aiosqlite connection in autocommit mode and creates its table
when missing, so it needs no migration of the shared schema. `open_cron_runs(path)` gives it a
connection of its own to the store's SQLite file (WAL lets it write beside the store's writer;
SQLite's busy timeout settles the rare collision). Bounded: the newest `keep_per_job` records of
each job, none older than `max_age_days`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime
from pathlib import Path

import aiosqlite

from bot.ports.cron import ChatSchedule, CronRun, CronRunStatus, JobPause
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

BUSY_TIMEOUT_MS = 10_000

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS cron_runs (
        run_id TEXT PRIMARY KEY,
        job TEXT NOT NULL,
        trigger TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        scheduled_for REAL,
        fired_at REAL NOT NULL,
        finished_at REAL,
        status TEXT NOT NULL,
        delivered INTEGER NOT NULL,
        parts INTEGER NOT NULL,
        accepted INTEGER NOT NULL,
        error TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS cron_runs_by_job ON cron_runs (job, fired_at)",
    # One row per schedule slot ever claimed: a second process on the same file (or a replica
    # on a shared store) never runs a slot twice.
    """CREATE TABLE IF NOT EXISTS cron_slots (
        job TEXT NOT NULL,
        slot REAL NOT NULL,
        claimed_at REAL NOT NULL,
        PRIMARY KEY (job, slot)
    )""",
    # Jobs a cost breaker paused (SPEC §17), until `bot cron resume NAME`.
    """CREATE TABLE IF NOT EXISTS cron_pauses (
        job TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        paused_at REAL NOT NULL
    )""",
)


class SqliteCronRuns:
    """Run records on an open connection. Call `await ensure_table()` once before use."""

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        keep_per_job: int = DEFAULT_KEEP_PER_JOB,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
        owns_connection: bool = False,
    ) -> None:
        self._conn = conn
        self._keep = keep_per_job
        self._max_age = max_age_days * 86_400.0
        self._owns = owns_connection
        self._table = False
        self._adding = asyncio.Lock()  # one transaction at a time on this connection

    async def ensure_table(self) -> None:
        for statement in _SCHEMA:
            await self._conn.execute(statement)
        self._table = True

    async def save(self, run: CronRun) -> None:
        await self._conn.execute(
            f"INSERT OR REPLACE INTO cron_runs ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            run_row(run),
        )
        if run.status is not CronRunStatus.RUNNING:
            await self._prune(run.job, run.fired_at)

    async def latest(self, job: str) -> CronRun | None:
        rows = await self.recent(job, limit=1)
        return rows[0] if rows else None

    async def last_slot(self, job: str) -> datetime | None:
        row = await self._one("SELECT MAX(scheduled_for) FROM cron_runs WHERE job = ?", (job,))
        return stored_time(row[0]) if row else None

    async def recent(self, job: str, limit: int = 20) -> list[CronRun]:
        if not await self._has_table():
            return []
        async with self._conn.execute(
            f"SELECT {COLUMNS} FROM cron_runs WHERE job = ? ORDER BY fired_at DESC, rowid DESC "
            "LIMIT ?",
            (job, limit),
        ) as cursor:
            return [stored_run(row) for row in await cursor.fetchall()]

    async def interrupt_running(self, finished_at: datetime) -> int:
        async with self._conn.execute(
            "UPDATE cron_runs SET status = ?, finished_at = ?, error = ? WHERE status = ?",
            (
                CronRunStatus.INTERRUPTED.value,
                finished_at.timestamp(),
                INTERRUPTED_ERROR,
                CronRunStatus.RUNNING.value,
            ),
        ) as cursor:
            return cursor.rowcount

    async def claim_slot(self, job: str, slot: datetime) -> bool:
        async with self._conn.execute(
            "INSERT OR IGNORE INTO cron_slots (job, slot, claimed_at) VALUES (?, ?, ?)",
            (job, slot.timestamp(), slot.timestamp()),
        ) as cursor:
            claimed = cursor.rowcount == 1
        await self._conn.execute(
            "DELETE FROM cron_slots WHERE job = ? AND slot < ?",
            (job, slot.timestamp() - self._max_age),
        )
        return claimed

    async def pause(self, job: str, reason: str, at: datetime) -> bool:
        async with self._conn.execute(
            "INSERT OR IGNORE INTO cron_pauses (job, reason, paused_at) VALUES (?, ?, ?)",
            (job, reason, at.timestamp()),
        ) as cursor:
            return cursor.rowcount == 1

    async def resume(self, job: str) -> bool:
        async with self._conn.execute("DELETE FROM cron_pauses WHERE job = ?", (job,)) as cursor:
            return cursor.rowcount == 1

    async def paused(self) -> list[JobPause]:
        if not await self._has_table("cron_pauses"):
            return []
        async with self._conn.execute(
            "SELECT job, reason, paused_at FROM cron_pauses ORDER BY paused_at, job"
        ) as cursor:
            return [stored_pause(row) for row in await cursor.fetchall()]

    async def add_schedule(self, schedule: ChatSchedule, *, per_place: int, per_person: int) -> str:
        # One write transaction: two processes on the file never both take the last free place.
        async with self._adding:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                met = await self._bound_met(schedule, per_place, per_person)
                if not met:
                    await self._conn.execute(
                        f"INSERT INTO chat_schedules ({SCHEDULE_COLUMNS}) "
                        "VALUES (?,?,?,?,?,?,?,?,?)",
                        schedule_row(schedule),
                    )
                await self._conn.execute("COMMIT")
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
        return met

    async def _bound_met(self, schedule: ChatSchedule, per_place: int, per_person: int) -> str:
        for column, value, limit, name in (
            ("place", schedule.place, per_place, "place"),
            ("creator", schedule.creator, per_person, "person"),
        ):
            row = await self._one(
                f"SELECT count(*) FROM chat_schedules WHERE {column} = ?",
                (value,),
                "chat_schedules",
            )
            if row is not None and int(row[0]) >= limit:
                return name
        return ""

    async def schedules(self, place: str | None = None) -> list[ChatSchedule]:
        if not await self._has_table("chat_schedules"):
            return []
        where, params = ("WHERE place = ?", (place,)) if place is not None else ("", ())
        async with self._conn.execute(
            f"SELECT {SCHEDULE_COLUMNS} FROM chat_schedules {where} ORDER BY created_at, id",
            params,
        ) as cursor:
            return [stored_schedule(row) for row in await cursor.fetchall()]

    async def remove_schedule(self, schedule_id: str) -> bool:
        async with self._conn.execute(
            "DELETE FROM chat_schedules WHERE id = ?", (schedule_id,)
        ) as cursor:
            return cursor.rowcount == 1

    async def aclose(self) -> None:
        if self._owns:
            await self._conn.close()

    async def _prune(self, job: str, now: datetime) -> None:
        await self._conn.execute(
            "DELETE FROM cron_runs WHERE fired_at < ?", (now.timestamp() - self._max_age,)
        )
        await self._conn.execute(
            """DELETE FROM cron_runs WHERE job = ? AND run_id NOT IN (
                   SELECT run_id FROM cron_runs WHERE job = ? ORDER BY fired_at DESC LIMIT ?)""",
            (job, job, self._keep),
        )

    async def _one(
        self, sql: str, params: tuple[object, ...], table: str = "cron_runs"
    ) -> sqlite3.Row | None:
        if not await self._has_table(table):
            return None
        async with self._conn.execute(sql, params) as cursor:
            row = await cursor.fetchone()
        return row if row is not None and row[0] is not None else None

    async def _has_table(self, name: str = "cron_runs") -> bool:
        """A store that never ran a job has no table yet (read-only views); that reads as empty.
        (A store an older version made has cron_runs but not cron_pauses.)"""
        if self._table and name == "cron_runs":
            return True
        async with self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ) as cursor:
            found = await cursor.fetchone() is not None
        if name == "cron_runs":
            self._table = found
        return found


async def open_cron_runs(path: Path, *, read_only: bool = False) -> SqliteCronRuns:
    """Run records on their own connection to the store file at `path` (which must exist: the
    store creates it owner-only). `read_only` for inspection (`bot cron list`)."""
    conn = await aiosqlite.connect(_uri(path, read_only), uri=True, isolation_level=None)
    try:
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        runs = SqliteCronRuns(conn, owns_connection=True)
        if not read_only:
            await runs.ensure_table()
    except BaseException:
        await conn.close()
        raise
    return runs


def _uri(path: Path, read_only: bool) -> str:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no store file. Fix: start the host once (`bot run`) so the store exists, "
            "or check store.path."
        )
    # mode=rw never creates the file: only the store creates it, owner-only.
    return f"{path.resolve().as_uri()}?mode={'ro' if read_only else 'rw'}"
