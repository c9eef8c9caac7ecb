"""PostgreSQL behind the shared store logic's seam (`bot.store.sql.conn.Sql`): `?` placeholders
become
`$1, $2...`, named locks are transaction-level advisory locks, and totals are summed (a counter row
every write updates would serialize the replicas' writes on its row lock)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from bot.ports.sql import Row
from bot.store.postgres.locks import key

_TOTALS = {
    "conversations": "SELECT count(*) FROM conversations",
    "history_bytes": "SELECT coalesce(sum(bytes), 0) FROM conversations",
    "record_bytes": "SELECT coalesce(sum(bytes), 0) FROM turn_records",
    "attachment_bytes": "SELECT coalesce(sum(bytes), 0) FROM attachments",
}
# A lock's name, qualified by the schema and hashed to the bigint key (`bot.store.postgres.locks`).
_LOCK = f"SELECT pg_advisory_xact_lock({key('$1')})"
_TRY_LOCK = f"SELECT pg_try_advisory_xact_lock({key('$1')})"


@lru_cache(maxsize=512)
def numbered(sql: str) -> str:
    """`sql` with each `?` outside a quoted string or name replaced by `$1`, `$2`..., in order."""
    out: list[str] = []
    quote = ""
    count = 0
    for char in sql:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "?":
            count += 1
            out.append(f"${count}")
            continue
        out.append(char)
    return "".join(out)


class PgSql:
    """An asyncpg connection (or the pool, for reads) as a `bot.store.sql.conn.Sql`."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, *params: Any) -> int:
        status = await self._conn.execute(numbered(sql), *params)
        # The command tag: "INSERT 0 1", "UPDATE 3", "DELETE 0".
        count = str(status).rsplit(" ", 1)[-1]
        return int(count) if count.isdigit() else 0

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        args = list(rows)
        if args:
            await self._conn.executemany(numbered(sql), args)

    async def fetch_all(self, sql: str, *params: Any) -> list[Row]:
        return list(await self._conn.fetch(numbered(sql), *params))

    async def fetch_one(self, sql: str, *params: Any) -> Row | None:
        row: Row | None = await self._conn.fetchrow(numbered(sql), *params)
        return row

    async def fetch_value(self, sql: str, *params: Any) -> Any:
        return await self._conn.fetchval(numbered(sql), *params)

    async def lock(self, name: str) -> None:
        await self._conn.execute(_LOCK, name)

    async def try_lock(self, name: str) -> bool:
        return bool(await self._conn.fetchval(_TRY_LOCK, name))

    async def total(self, name: str) -> int:
        return int(await self._conn.fetchval(_TOTALS[name]))
