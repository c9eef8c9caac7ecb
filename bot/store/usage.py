"""Per-turn usage and budget notices in the store's file (`bot.ports.records.UsageLedger`).

One small row per turn that used the model: when, where (channel, surface), who (host-side person
id, never shown to the model), which model, the tokens the API reported and their price. Budgets
sum it per day; `bot usage` reports it. The tables are created when missing, so they need no
migration of the shared schema. Rows older than `USAGE_KEEP_DAYS` are pruned as new ones arrive.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

import aiosqlite

from bot.ports.records import Spent, Usage, UsageEntry
from bot.store.db import Database

USAGE_KEEP_DAYS = 400

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS usage (
        turn_id TEXT PRIMARY KEY,
        at REAL NOT NULL,
        channel TEXT NOT NULL,
        surface TEXT NOT NULL,
        person TEXT,
        model TEXT NOT NULL,
        input INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        cache_write_1h INTEGER NOT NULL,
        output INTEGER NOT NULL,
        cost REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS usage_by_time ON usage (at)",
    "CREATE INDEX IF NOT EXISTS usage_by_surface ON usage (surface, at)",
    "CREATE INDEX IF NOT EXISTS usage_by_person ON usage (person, at)",
    """CREATE TABLE IF NOT EXISTS budget_notices (
        scope TEXT NOT NULL,
        period TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (scope, period)
    ) WITHOUT ROWID""",
)
_TOKENS = "input + cache_read + cache_write + output"


class SqliteUsage:
    """The UsageLedger port, plus `rows` for `bot usage`."""

    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    async def ensure_tables(self) -> None:
        """Create the tables when missing (a read first: opening the store stays write-free)."""
        present = await self._db.fetch_all(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)",
            ("usage", "budget_notices"),
        )
        if len(present) == 2:
            return

        async def create(conn: aiosqlite.Connection) -> None:
            for statement in _SCHEMA:
                await conn.execute(statement)

        await self._db.write(create)

    async def add(self, entry: UsageEntry) -> None:
        u = entry.usage
        row = (
            entry.turn_id,
            entry.at.timestamp(),
            entry.channel,
            entry.surface,
            entry.person,
            entry.model,
            u.input_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.cache_write_1h_tokens,
            u.output_tokens,
            entry.cost_usd,
        )
        oldest = self._clock() - USAGE_KEEP_DAYS * 86_400.0

        async def add(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "INSERT OR REPLACE INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row
            )
            await conn.execute("DELETE FROM usage WHERE at < ?", (oldest,))
            await conn.execute("DELETE FROM budget_notices WHERE at < ?", (oldest,))

        await self._db.write(add)

    async def spent(
        self, since: datetime, *, surface: str | None = None, person: str | None = None
    ) -> Spent:
        where: list[str] = ["at >= ?"]
        params: list[float | str] = [since.timestamp()]
        for column, value in (("surface", surface), ("person", person)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        row = await self._db.fetch_one(
            f"SELECT coalesce(sum({_TOKENS}), 0), coalesce(sum(cost), 0.0) FROM usage "
            f"WHERE {' AND '.join(where)}",
            params,
        )
        return Spent(int(row[0]), float(row[1])) if row else Spent()

    async def first_notice(self, scope: str, period: str) -> bool:
        async def mark(conn: aiosqlite.Connection) -> bool:
            cursor = await conn.execute(
                "INSERT OR IGNORE INTO budget_notices (scope, period, at) VALUES (?, ?, ?)",
                (scope, period, self._clock()),
            )
            return cursor.rowcount == 1

        return await self._db.write(mark)

    async def rows(self, since: datetime | None = None) -> list[UsageEntry]:
        """Every stored turn since `since` (all when None), oldest first."""
        start = since.timestamp() if since is not None else 0.0
        rows = await self._db.fetch_all(
            "SELECT * FROM usage WHERE at >= ? ORDER BY at, turn_id", (start,)
        )
        return [_row(r) for r in rows]


def _row(row: sqlite3.Row) -> UsageEntry:
    return UsageEntry(
        turn_id=row["turn_id"],
        at=datetime.fromtimestamp(row["at"], UTC),
        channel=row["channel"],
        surface=row["surface"],
        person=row["person"],
        model=row["model"],
        usage=Usage(
            input_tokens=row["input"],
            cache_read_tokens=row["cache_read"],
            cache_write_tokens=row["cache_write"],
            output_tokens=row["output"],
            cache_write_1h_tokens=row["cache_write_1h"],
        ),
        cost_usd=float(row["cost"]),
    )
