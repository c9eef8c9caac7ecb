"""Filling an empty PostgreSQL store from exported SQLite tables (`bot store migrate`).

Everything is copied in one transaction (COPY per batch), so a failure leaves the target as
empty as it was; identity counters are moved past the copied ids afterwards, so rows written
later never collide with copied ones. Text loses only what PostgreSQL cannot hold (NUL).
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any, Protocol

from bot.errors import TargetNotEmptyError
from bot.store.postgres.db import PgDatabase
from bot.store.postgres.fts import storable


class _Exported(Protocol):
    """One batch of one table's rows (`bot.store.sqlite.export.Batch`)."""

    @property
    def table(self) -> str: ...

    @property
    def columns(self) -> tuple[str, ...]: ...

    @property
    def rows(self) -> list[tuple[Any, ...]]: ...


async def import_tables(db: PgDatabase, batches: AsyncIterable[_Exported]) -> None:
    """Copy every batch into its table, all in one transaction, into an empty store."""

    async def copy(conn: Any) -> None:
        await _require_empty(conn, db.where)
        types: dict[str, dict[str, str]] = {}
        async for batch in batches:
            if batch.table not in types:
                types[batch.table] = await _column_types(conn, batch.table)
            kinds = types[batch.table]
            columns = [c for c in batch.columns if c in kinds]
            picks = [batch.columns.index(c) for c in columns]
            records = [
                tuple(_value(row[i], kinds[c]) for i, c in zip(picks, columns, strict=True))
                for row in batch.rows
            ]
            await conn.copy_records_to_table(batch.table, records=records, columns=columns)
        for table in types:
            await _advance_identity(conn, table)

    await db.write(copy)


async def count_rows(db: PgDatabase, tables: tuple[str, ...]) -> dict[str, int]:
    return {table: int(await db.fetch_value(f"SELECT count(*) FROM {table}")) for table in tables}


async def _require_empty(conn: Any, where: str) -> None:
    held = {
        table: int(await conn.fetchval(f"SELECT count(*) FROM {table}"))
        for table in ("conversations", "memories", "turn_records", "events", "inbox")
    }
    if any(held.values()):
        found = ", ".join(f"{n} {t}" for t, n in held.items() if n)
        raise TargetNotEmptyError(
            f"{where} already holds data ({found}). Fix: migrate into a new, empty database "
            "(createdb ...), or drop this one's tables first if it holds nothing you need."
        )


async def _column_types(conn: Any, table: str) -> dict[str, str]:
    """The table's writable columns (generated ones left out) and their types."""
    rows = await conn.fetch(
        """SELECT column_name, data_type FROM information_schema.columns
           WHERE table_name = $1 AND table_schema = current_schema()
             AND is_generated = 'NEVER'""",
        table,
    )
    return {row["column_name"]: row["data_type"] for row in rows}


def _value(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "boolean":
        return bool(value)
    if kind == "text":
        return storable(str(value))
    if kind in ("bigint", "integer"):
        return int(value)
    if kind == "double precision":
        return float(value)
    return value


async def _advance_identity(conn: Any, table: str) -> None:
    rows = await conn.fetch(
        """SELECT column_name FROM information_schema.columns
           WHERE table_name = $1 AND table_schema = current_schema() AND is_identity = 'YES'""",
        table,
    )
    for row in rows:
        column = row["column_name"]
        await conn.execute(
            f"""SELECT setval(pg_get_serial_sequence('{table}', '{column}'),
                       coalesce((SELECT max({column}) FROM {table}), 0) + 1, false)"""
        )
