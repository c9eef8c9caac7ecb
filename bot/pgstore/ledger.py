"""The processed-event ledger on PostgreSQL: one INSERT ... ON CONFLICT DO NOTHING per event, so
deliveries racing on any number of replicas get exactly one True between them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.pgstore.db import PgDatabase
from bot.store.ledger import _PRUNE_EVERY, DEFAULT_KEEP, DEFAULT_MAX_AGE_DAYS


class PgLedger:
    """The EventLedger port on PostgreSQL."""

    def __init__(
        self,
        db: PgDatabase,
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

        async def record(conn: Any) -> bool:
            status = await conn.execute(
                "INSERT INTO events (source, event_id, seen_at) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING",
                source,
                event_id,
                self._clock(),
            )
            if prune:
                await self._prune(conn)
            return bool(status == "INSERT 0 1")

        return await self._db.write(record)

    async def prune(self) -> None:
        await self._db.write(self._prune)

    async def _prune(self, conn: Any) -> None:
        await conn.execute("DELETE FROM events WHERE seen_at < $1", self._clock() - self._max_age)
        await conn.execute(
            """DELETE FROM events WHERE seen_at < (
                   SELECT seen_at FROM events ORDER BY seen_at DESC LIMIT 1 OFFSET $1)""",
            self._keep - 1,
        )
