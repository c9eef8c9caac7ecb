"""SQLite behind the shared store logic's seam (`bot.store.sql.conn.Sql`): `?` is SQLite's own
placeholder, a write already holds the whole file (so named locks are free), and the totals are
the rows the schema's triggers keep in `totals`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite

from bot.ports.sql import Row


class SqliteSql:
    """One aiosqlite connection as a `bot.store.sql.conn.Sql`."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, *params: Any) -> int:
        async with self._conn.execute(sql, params) as cursor:
            return max(cursor.rowcount, 0)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def fetch_all(self, sql: str, *params: Any) -> list[Row]:
        # One trip to the connection's thread (execute, fetch and drop the cursor there) instead
        # of three: each trip costs a thread wake-up and an event-loop wake-up.
        return list(await self._conn.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, *params: Any) -> Row | None:
        # All rows, then the first: a statement with RETURNING is finished, not left running.
        rows = await self.fetch_all(sql, *params)
        return rows[0] if rows else None

    async def fetch_value(self, sql: str, *params: Any) -> Any:
        row = await self.fetch_one(sql, *params)
        return row[0] if row is not None else None

    async def lock(self, name: str) -> None:
        """Every write transaction already holds the file (BEGIN IMMEDIATE)."""

    async def try_lock(self, name: str) -> bool:
        return True

    async def total(self, name: str) -> int:
        return int(await self.fetch_value("SELECT value FROM totals WHERE name = ?", name) or 0)
