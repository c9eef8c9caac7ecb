"""The usage ledger's tables in the store's file (`bot.store.sql.usage` keeps the ledger itself):
created
when missing, so they need no migration of the shared schema."""

from __future__ import annotations

import aiosqlite

from bot.store.sqlite.db import SqliteDatabase

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


USAGE_TABLES = ("usage", "budget_notices")


async def ensure_usage_tables(db: SqliteDatabase) -> None:
    """Create the tables when missing (a read first: opening the store stays write-free)."""
    present = await db.fetch_all(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)", USAGE_TABLES
    )
    if len(present) == 2:
        return

    async def create(conn: aiosqlite.Connection) -> None:
        for statement in _SCHEMA:
            await conn.execute(statement)

    await db.write(create)
