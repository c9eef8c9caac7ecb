"""Per-turn usage and budget notices (the `bot.ports.records.UsageLedger` port) on PostgreSQL,
as the SQLite store keeps them (`bot.store.usage`); a notice is marked once across replicas."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.pgstore.db import PgDatabase
from bot.ports.records import Spent, UsageEntry
from bot.store.usage import _TOKENS, USAGE_KEEP_DAYS, _row


class PgUsage:
    """The UsageLedger port, plus `rows` for `bot usage`."""

    def __init__(self, db: PgDatabase, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    async def add(self, entry: UsageEntry) -> None:
        u = entry.usage
        oldest = self._clock() - USAGE_KEEP_DAYS * 86_400.0

        async def add(conn: Any) -> None:
            await conn.execute(
                """INSERT INTO usage VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                   ON CONFLICT (turn_id) DO UPDATE SET at = excluded.at,
                       channel = excluded.channel, surface = excluded.surface,
                       person = excluded.person, model = excluded.model,
                       input = excluded.input, cache_read = excluded.cache_read,
                       cache_write = excluded.cache_write,
                       cache_write_1h = excluded.cache_write_1h, output = excluded.output,
                       cost = excluded.cost""",
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
            await conn.execute("DELETE FROM usage WHERE at < $1", oldest)
            await conn.execute("DELETE FROM budget_notices WHERE at < $1", oldest)

        await self._db.write(add)

    async def spent(
        self, since: datetime, *, surface: str | None = None, person: str | None = None
    ) -> Spent:
        where = ["at >= $1"]
        params: list[Any] = [since.timestamp()]
        for column, value in (("surface", surface), ("person", person)):
            if value is not None:
                params.append(value)
                where.append(f"{column} = ${len(params)}")
        row = await self._db.fetch_one(
            f"SELECT coalesce(sum({_TOKENS}), 0), coalesce(sum(cost), 0.0) FROM usage "
            f"WHERE {' AND '.join(where)}",
            params,
        )
        return Spent(int(row[0]), float(row[1])) if row else Spent()

    async def first_notice(self, scope: str, period: str) -> bool:
        async def mark(conn: Any) -> bool:
            status = await conn.execute(
                "INSERT INTO budget_notices (scope, period, at) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING",
                scope,
                period,
                self._clock(),
            )
            return bool(status == "INSERT 0 1")

        return await self._db.write(mark)

    async def rows(self, since: datetime | None = None) -> list[UsageEntry]:
        """Every stored turn since `since` (all when None), oldest first."""
        start = since.timestamp() if since is not None else 0.0
        rows = await self._db.fetch_all(
            "SELECT * FROM usage WHERE at >= $1 ORDER BY at, turn_id", (start,)
        )
        return [_row(r) for r in rows]
