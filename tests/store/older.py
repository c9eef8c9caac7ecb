"""A store's database as an older version of this program left it, on either SQL engine: the
migrations up to a version applied by hand, then rows written as that version wrote them, so a
test opens it with today's program and sees what the migrations after it made of them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg

from bot.store.postgres import schema as pg_schema
from bot.store.sqlite import schema as sqlite_schema
from tests.engines import Engine


async def at_version(engine: Engine, version: int, *rows: str) -> None:
    """Create the schema of `version` at the engine's location and run `rows` (plain SQL
    statements, no parameters) in it."""
    if isinstance(engine.location, Path):
        engine.location.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with sqlite3.connect(engine.location) as conn:
            for migration in sqlite_schema.MIGRATIONS[:version]:
                for statement in migration:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            for row in rows:
                conn.execute(row)
        return
    assert isinstance(engine.location, str), "an SQL engine"
    conn = await asyncpg.connect(engine.location)
    try:
        for migration in pg_schema.MIGRATIONS[:version]:
            for statement in migration:
                await conn.execute(statement)
        await conn.execute("CREATE TABLE bot_schema (version INTEGER NOT NULL)")
        await conn.execute(f"INSERT INTO bot_schema (version) VALUES ({version})")
        for row in rows:
            await conn.execute(row)
    finally:
        await conn.close()
