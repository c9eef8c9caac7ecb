"""Reading a whole SQLite store out, table by table, for `bot store migrate` (to PostgreSQL).

`export_tables` opens the file read-only (an older schema is brought up to date in a private copy,
so its tables have the columns the PostgreSQL schema expects; the source never changes) and yields
each table's name, columns and rows in batches.
Index-only tables (the FTS5 index, the trigger-kept totals) are not exported: the target keeps
its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from bot.errors import SchemaTooNewError, StoreOpenError
from bot.store.sqlite.schema import SCHEMA_VERSION, migrate, schema_version

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
    "console_audit",
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
    async with _source(path) as conn:
        for table in TABLES:
            columns = await _columns(conn, table)
            if not columns:
                continue  # a table this store never created (cron runs before any job ran)
            names = ", ".join(columns)
            async with conn.execute(f"SELECT {names} FROM {table}") as cursor:
                while rows := list(await cursor.fetchmany(BATCH)):
                    yield Batch(table, columns, [tuple(row) for row in rows])


async def count_rows(path: Path) -> dict[str, int]:
    """How many rows each exported table holds (0 for one that does not exist)."""
    counts = {}
    async with _source(path) as conn:
        for table in TABLES:
            if await _columns(conn, table):
                async with conn.execute(f"SELECT count(*) FROM {table}") as cursor:
                    row = await cursor.fetchone()
                counts[table] = int(row[0]) if row else 0
            else:
                counts[table] = 0
    return counts


@contextlib.asynccontextmanager
async def _source(path: Path) -> AsyncIterator[aiosqlite.Connection]:
    """The store at `path`, opened read-only (SQLite's `mode=ro`: not a byte of it changes, and
    a read-only snapshot can be copied). A file of an older schema is copied into a private
    temporary file first, and the copy is brought up to date, never the source."""
    uri = f"{(await asyncio.to_thread(path.resolve)).as_uri()}?mode=ro"
    try:
        conn = await aiosqlite.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise StoreOpenError(
            f"{path}: cannot open the database to read it ({exc}). Fix: check that the file "
            "exists and this user may read it."
        ) from None
    try:
        conn.row_factory = sqlite3.Row
        found = await schema_version(conn)
        if found > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"{path}: database schema version {found} is newer than this program's "
                f"({SCHEMA_VERSION}). Fix: upgrade the bot before migrating this store."
            )
        if found == SCHEMA_VERSION:
            yield conn
            return
        with tempfile.TemporaryDirectory(prefix="bot-migrate-") as folder:
            copy = await aiosqlite.connect(Path(folder) / "source.sqlite3", isolation_level=None)
            try:
                copy.row_factory = sqlite3.Row
                await conn.backup(copy)
                await migrate(copy, f"{path} (a private copy)")
                yield copy
            finally:
                await copy.close()
    finally:
        await conn.close()


async def _columns(conn: aiosqlite.Connection, table: str) -> tuple[str, ...]:
    async with conn.execute(f"PRAGMA table_info({table})") as cursor:
        rows = await cursor.fetchall()
    skip = _SQLITE_ONLY.get(table, set())
    return tuple(row["name"] for row in rows if row["name"] not in skip)
