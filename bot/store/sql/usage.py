"""Per-turn usage and budget notices (`bot.ports.records.UsageLedger`).

One small row per turn that used the model: when, where (channel, surface), who (host-side person
id, never shown to the model), which model, the tokens the API reported and their price. Budgets
sum it per day; `bot usage` reports it. A budget notice is marked once (across replicas, on a
shared database). Rows older than `USAGE_KEEP_DAYS` are pruned as new ones arrive (every
`PRUNE_EVERY` charges).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from bot.ports.records import Spent, Usage, UsageEntry
from bot.ports.sql import Row, Sql, SqlDatabase
from bot.store.sql.conn import PruneSchedule

USAGE_KEEP_DAYS = 400
PRUNE_EVERY = 100  # turns charged between two prunings of old usage rows and notices

_TOKENS = "input + cache_read + cache_write + output"
_COLUMNS = (
    "turn_id, at, channel, surface, person, model, input, cache_read, cache_write, "
    "cache_write_1h, output, cost"
)
_UPDATES = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")[1:])


class SqlUsageLedger:
    """The UsageLedger port, plus `rows` for `bot usage`."""

    def __init__(self, db: SqlDatabase, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock
        self._prune = PruneSchedule(PRUNE_EVERY)

    async def add(self, entry: UsageEntry) -> None:
        await self._db.transaction(lambda tx: self.add_in(tx, entry))

    async def add_in(self, tx: Sql, entry: UsageEntry) -> None:
        """Count `entry` inside the caller's write transaction (a turn's publication); rows past
        the kept days go now and then, not at every turn."""
        u = entry.usage
        await tx.execute(
            f"INSERT INTO usage ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            f"ON CONFLICT (turn_id) DO UPDATE SET {_UPDATES}",
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
        if self._prune.due():
            oldest = self._clock() - USAGE_KEEP_DAYS * 86_400.0
            await tx.execute("DELETE FROM usage WHERE at < ?", oldest)
            await tx.execute("DELETE FROM budget_notices WHERE at < ?", oldest)

    async def spent(
        self, since: datetime, *, surface: str | None = None, person: str | None = None
    ) -> Spent:
        where: list[str] = ["at >= ?"]
        params: list[float | str] = [since.timestamp()]
        for column, value in (("surface", surface), ("person", person)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        row = await self._db.reads().fetch_one(
            f"SELECT coalesce(sum({_TOKENS}), 0), coalesce(sum(cost), 0.0) FROM usage "
            f"WHERE {' AND '.join(where)}",
            *params,
        )
        return Spent(int(row[0]), float(row[1])) if row else Spent()

    async def first_notice(self, scope: str, period: str) -> bool:
        async def mark(tx: Sql) -> bool:
            added = await tx.execute(
                "INSERT INTO budget_notices (scope, period, at) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                scope,
                period,
                self._clock(),
            )
            return added == 1

        return await self._db.transaction(mark)

    async def rows(self, since: datetime | None = None) -> list[UsageEntry]:
        """Every stored turn since `since` (all when None), oldest first."""
        start = since.timestamp() if since is not None else 0.0
        rows = await self._db.reads().fetch_all(
            "SELECT * FROM usage WHERE at >= ? ORDER BY at, turn_id", start
        )
        return [usage_entry(r) for r in rows]


def usage_entry(row: Row) -> UsageEntry:
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
