"""The tests' PostgreSQL: one throwaway database per test session on the machine's server, and a
fresh schema in it for each test that asks, so parallel runs and tests never see each other.

`TEST_POSTGRES_URL` names the server (an admin URL, e.g. postgresql://postgres@127.0.0.1:5432/
postgres). When it is set, an unreachable server fails the tests that need it (CI sets it); when
it is not, the default local server is tried and, if it does not answer, those tests are skipped
with one line saying why.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

ENV = "TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT = 3.0
T = TypeVar("T")


def required() -> bool:
    return bool(os.environ.get(ENV))


def admin_url() -> str:
    return os.environ.get(ENV) or DEFAULT_URL


def with_database(url: str, database: str, schema: str | None = None) -> str:
    parts = urlsplit(url)
    query = f"search_path={schema}" if schema else ""
    return urlunsplit(parts._replace(path=f"/{database}", query=query))


@dataclass
class PgServer:
    """The session's database on the server; `new_schema()` gives a test its own URL."""

    admin: str
    database: str
    _schemas: int = field(default=0)

    @property
    def url(self) -> str:
        return with_database(self.admin, self.database)

    async def new_schema(self) -> str:
        self._schemas += 1
        name = f"t{self._schemas}_{secrets.token_hex(3)}"
        conn = await asyncpg.connect(self.url, timeout=CONNECT_TIMEOUT)
        try:
            await conn.execute(f"CREATE SCHEMA {name}")
        finally:
            await conn.close()
        return with_database(self.admin, self.database, name)


async def _create(admin: str) -> PgServer:
    database = f"bot_test_{os.getpid()}_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(admin, timeout=CONNECT_TIMEOUT)
    try:
        await conn.execute(f"CREATE DATABASE {database}")
        # Tests kill replicas, never the server: commits need not wait for the disk here.
        await conn.execute(f"ALTER DATABASE {database} SET synchronous_commit = off")
    finally:
        await conn.close()
    return PgServer(admin, database)


async def _drop(server: PgServer) -> None:
    conn = await asyncpg.connect(server.admin, timeout=CONNECT_TIMEOUT)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {server.database} WITH (FORCE)")
    finally:
        await conn.close()


def _run_apart(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` on a loop of its own: the session fixture may be first asked for from inside
    a test's running loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def start() -> tuple[PgServer | None, str | None]:
    """The session's server, or None and why it cannot be used."""
    admin = admin_url()
    try:
        return _run_apart(_create(admin)), None
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return None, (
            f"PostgreSQL not reachable at {admin} ({type(exc).__name__}: {exc}); set {ENV} "
            "to a reachable server to run them"
        )


def stop(server: PgServer) -> None:
    """Drop the session's database from a detached process. PostgreSQL 15 forces a checkpoint
    on DROP DATABASE (every dirty buffer of the server written and synced), which takes seconds,
    tens of seconds on a busy machine, and the session need not wait for it."""
    # posix_spawn, not Popen: a Popen never waited for warns (ResourceWarning) when collected.
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-m", "tests.postgres", server.admin, server.database],
        {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        file_actions=[(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)],
        setsid=True,
    )


if __name__ == "__main__":
    _run_apart(_drop(PgServer(sys.argv[1], sys.argv[2])))
