"""Reading a whole SQLite store out, table by table, for `bot store migrate` (to PostgreSQL).

`export_tables` opens the file (migrating it to the current schema first, so its tables have the
columns the PostgreSQL schema expects) and yields each table's name, columns and rows in batches.
Index-only tables (the FTS5 index, the trigger-kept totals) are not exported: the target keeps
its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.store.db import Database

# In an order that keeps references sensible; every table that holds data of its own.
TABLES = (
    "conversations",
    "messages",
    "memories",
    "participation",
    "term_docs",
    "turn_records",
    "events",
    "chat_buffer",
    "cron_runs",
    "inbox",
    "outbox",
    "usage",
    "budget_notices",
    "attachments",
    "attachment_refs",
)
# Columns only the SQLite file has (its row ids for tables the target keys otherwise).
_SQLITE_ONLY = {"messages": {"id"}}
BATCH = 1000


@dataclass(frozen=True, slots=True)
class Batch:
    table: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


async def export_tables(path: Path) -> AsyncIterator[Batch]:
    """Every row of every table of the store at `path`, a batch at a time."""
    db = await Database.open(path)
    try:
        for table in TABLES:
            columns = await _columns(db, table)
            if not columns:
                continue  # a table this store never created (cron runs before any job ran)
            names = ", ".join(columns)
            async for rows in db.stream(f"SELECT {names} FROM {table}", BATCH):
                yield Batch(table, columns, [tuple(row) for row in rows])
    finally:
        await db.aclose()


async def count_rows(path: Path) -> dict[str, int]:
    """How many rows each exported table holds (0 for one that does not exist)."""
    db = await Database.open(path)
    try:
        counts = {}
        for table in TABLES:
            if await _columns(db, table):
                row = await db.fetch_one(f"SELECT count(*) FROM {table}")
                counts[table] = int(row[0]) if row else 0
            else:
                counts[table] = 0
        return counts
    finally:
        await db.aclose()


async def _columns(db: Database, table: str) -> tuple[str, ...]:
    rows = await db.fetch_all(f"PRAGMA table_info({table})")
    skip = _SQLITE_ONLY.get(table, set())
    return tuple(row["name"] for row in rows if row["name"] not in skip)
