"""The store engines behind one fixture: a test marked `all_engines` runs (when it uses `engine`
or `store`) once on SQLite, once on PostgreSQL and once on the in-memory store of `bot.testing`,
so one suite holds all three to the same contract; `both_engines` runs it on the two SQL engines
(a test of what only SQL has: its files, tables and constraints), `postgres_only` on PostgreSQL
alone, `replica_engines` on the engines whose stores are replicas sharing their data (PostgreSQL,
and the in-memory store opened `shared`). The closest mark wins: a module marked `all_engines`
marks its SQL-only tests `both_engines`.

`Engine.open(...)` opens the store at the test's own location (a file in tmp_path, a fresh schema
in the session's PostgreSQL database, or fresh in-memory tables) with the given settings; opening
again reaches the same data, as a restart would.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.cli.stored import open_configured
from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.errors import StoreFault
from bot.ports.stores import OpenStore
from bot.testing.store import MemoryStore, open_memory_store
from bot.testing.tables import Tables
from tests import postgres

SQL_ENGINES = ("sqlite", "postgresql")
ENGINES = (*SQL_ENGINES, "memory")
REPLICA_ENGINES = ("postgresql", "memory-replicas")
# What a write to a table a test made fail raises (`Engine.failing`), on each engine.
WRITE_FAILED = (sqlite3.OperationalError, asyncpg.UndefinedTableError, StoreFault)


class Clock:
    """Unix seconds that only move when a test moves them."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Engine:
    name: str
    # The SQLite file, the PostgreSQL URL of the test's schema, or the in-memory tables.
    location: Path | str | Tables
    clock: Clock

    @property
    def postgres(self) -> bool:
        return self.name == "postgresql"

    @property
    def memory(self) -> bool:
        return isinstance(self.location, Tables)

    def settings(self, **store: Any) -> StoreSettings:
        if isinstance(self.location, Path):
            return StoreSettings(path=self.location, **store)
        if isinstance(self.location, str):
            return StoreSettings(url=self.location, **store)
        return StoreSettings(**store)

    async def open(
        self,
        memory: MemorySettings | None = None,
        *,
        attachments: AttachmentSettings | None = None,
        **store: Any,
    ) -> OpenStore:
        if isinstance(self.location, Tables):
            return open_memory_store(
                self.settings(**store),
                memory,
                attachments=attachments,
                clock=self.clock,
                tables=self.location,
                shared=self.name == "memory-replicas",
            )
        return await open_configured(
            self.settings(**store),
            memory or MemorySettings(),
            attachments=attachments,
            clock=self.clock,
        )

    def inbox(self, store: Any, **bounds: Any) -> Any:
        """An inbox with its own bounds on the open store's database."""
        if isinstance(store, MemoryStore):
            from bot.testing.inbox import MemoryInbox

            return MemoryInbox(store.opened, store.buffer, **bounds)
        from bot.store.sql.inbox import SqlInbox

        return SqlInbox(store.db, self.clock, **bounds)

    async def lose_heartbeat(self, store: Any) -> None:
        """The replica `store` is taken for gone by the others while it runs on (its heartbeat
        session was cut)."""
        if isinstance(store, MemoryStore):
            store.die()
            return
        from bot.store.postgres.owners import duty

        await store.leadership.release(duty(store.owner))

    @contextlib.asynccontextmanager
    async def failing(self, store: Any, table: str) -> AsyncIterator[None]:
        """While inside, every write to `table` fails (raising one of WRITE_FAILED): on the SQL
        engines the table is renamed away, the in-memory store is told."""
        if isinstance(store, MemoryStore):
            with store.tables.failing(table):
                yield
            return

        async def rename(conn: Any, old: str, new: str) -> None:
            await conn.execute(f"ALTER TABLE {old} RENAME TO {new}")

        await store.db.write(lambda conn: rename(conn, table, f"{table}_away"))
        try:
            yield
        finally:
            await store.db.write(lambda conn: rename(conn, f"{table}_away", table))


_state: dict[str, Any] = {}


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PgServer]:
    """The session's PostgreSQL database (created on first use, dropped at the end)."""
    if "server" not in _state:
        _state["server"], _state["why"] = postgres.start()
    server = _state["server"]
    if server is None:
        if postgres.required():
            pytest.fail(f"{postgres.ENV} is set but {_state['why']}")
        pytest.skip(_state["why"])
    yield server
    if _state.get("server") is not None:
        postgres.stop(server)
        _state["server"] = None
        _state["why"] = "dropped"


def skipped_reason() -> str | None:
    """Why the PostgreSQL tests were skipped in this session, if they were."""
    if _state.get("server") is None and _state.get("why") not in (None, "dropped"):
        return str(_state["why"])
    return None


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "bot.sqlite3"


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[OpenStore]:
    """A fresh store of the test's engine, closed after the test."""
    opened = await engine.open()
    yield opened
    await opened.aclose()


@pytest.fixture
async def engine(request: pytest.FixtureRequest, db_path: Path, clock: Clock) -> Engine:
    name = getattr(request, "param", "sqlite")
    if name.startswith("memory"):
        return Engine(name, Tables(clock), clock)
    if name == "postgresql":
        server: postgres.PgServer = request.getfixturevalue("pg_server")
        return Engine(name, await server.new_schema(), clock)
    return Engine(name, db_path, clock)


MARKED = {
    "all_engines": ENGINES,
    "both_engines": SQL_ENGINES,
    "postgres_only": ("postgresql",),
    "replica_engines": REPLICA_ENGINES,
}


def parametrize_engines(metafunc: pytest.Metafunc) -> None:
    """For `pytest_generate_tests`: the engines of the test's closest engine mark (`MARKED`)."""
    if "engine" not in metafunc.fixturenames:
        return
    for marker in metafunc.definition.iter_markers():
        if marker.name in MARKED:
            metafunc.parametrize("engine", MARKED[marker.name], indirect=True)
            return
