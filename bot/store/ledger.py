"""The processed-event ledger: remembers platform event ids so a redelivery is never answered twice.

`first_sight` is one INSERT OR IGNORE, so two deliveries racing (in this process or another) get
exactly one True between them, and the answer survives restarts. The ledger is bounded by age and
by count; pruning runs every `_PRUNE_EVERY` insertions so the common path stays one statement.
"""

from __future__ import annotations

from collections.abc import Callable

import aiosqlite

from bot.store.db import Database

DEFAULT_KEEP = 100_000
DEFAULT_MAX_AGE_DAYS = 7.0
_PRUNE_EVERY = 1_000


class SqliteLedger:
    """The EventLedger port on the shared database."""

    def __init__(
        self,
        db: Database,
        clock: Callable[[], float],
        *,
        keep: int = DEFAULT_KEEP,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ):
        self._db = db
        self._clock = clock
        self._keep = keep
        self._max_age = max_age_days * 86_400.0
        self._since_prune = 0

    async def first_sight(self, source: str, event_id: str) -> bool:
        self._since_prune += 1
        prune = self._since_prune >= _PRUNE_EVERY
        if prune:
            self._since_prune = 0

        async def record(conn: aiosqlite.Connection) -> bool:
            async with conn.execute(
                "INSERT OR IGNORE INTO events (source, event_id, seen_at) VALUES (?, ?, ?)",
                (source, event_id, self._clock()),
            ) as cursor:
                new = cursor.rowcount == 1
            if prune:
                await self._prune(conn)
            return new

        return await self._db.write(record)

    async def prune(self) -> None:
        await self._db.write(self._prune)

    async def _prune(self, conn: aiosqlite.Connection) -> None:
        await conn.execute("DELETE FROM events WHERE seen_at < ?", (self._clock() - self._max_age,))
        # The newest `keep` by time survive; OFFSET finds the oldest of them via the age index.
        await conn.execute(
            """DELETE FROM events WHERE seen_at < (
                   SELECT seen_at FROM events ORDER BY seen_at DESC LIMIT 1 OFFSET ?)""",
            (self._keep - 1,),
        )
