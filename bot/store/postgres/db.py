"""The PostgreSQL handle: a connection pool, write transactions that commit or roll back whole.

Every write runs in one transaction on one pooled connection (`PgDatabase.write`) and is shielded
from cancellation like the SQLite store's, so a cancelled turn never leaves half a transaction
behind. A write that loses a deadlock or a serialization conflict with another replica is run
again from the start (it is one transaction, so nothing of the lost attempt remains). Reads take
any pooled connection and see committed data only. A read-only handle (the inspection commands)
runs every transaction read-only and never migrates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import structlog

from bot.errors import DuplicateKey, StoreOpenError
from bot.ports.sql import Sql
from bot.store.postgres.schema import SCHEMA_VERSION, migrate, schema_version
from bot.store.postgres.sql import PgSql
from bot.store.sql.writes import ShieldedWrites

log = structlog.get_logger(__name__)

T = TypeVar("T")
Write = Callable[[Any], Awaitable[T]]

POOL_SIZE = 10
CONNECT_TIMEOUT = 10.0
_RETRIES = 5
_RETRYABLE = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)
# What connecting can raise besides the server's own errors (refused, unknown host, timeout).
CONNECT_ERRORS = (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def shown_url(url: str) -> str:
    """The URL as it may be printed or logged: never with a password, even a misplaced one."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PgDatabase:
    """The open database. Create it with `await PgDatabase.open(url)`."""

    def __init__(self, pool: Any, where: str) -> None:
        self.where = where
        self._pool = pool
        self._writes = ShieldedWrites(where)

    @classmethod
    async def open(
        cls, url: str, *, pool_size: int = POOL_SIZE, read_only: bool = False
    ) -> PgDatabase:
        """Connect (and migrate). `read_only`: every transaction is read-only and nothing is
        migrated, unless the schema is older than this version's (then it is opened as usual)."""
        where = shown_url(url)
        settings = {"default_transaction_read_only": "on"} if read_only else None
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=pool_size,
                timeout=CONNECT_TIMEOUT,
                server_settings=settings,
            )
        except CONNECT_ERRORS as exc:
            raise StoreOpenError(
                f"{where}: cannot connect to PostgreSQL ({_reason(exc)}). Fix: check that the "
                "server runs and store.url names its host, port, user and database; put the "
                "password in PGPASSWORD (or .pgpass), never in the URL."
            ) from None
        try:
            async with pool.acquire() as conn:
                current = read_only and await schema_version(conn) == SCHEMA_VERSION
                if not read_only:
                    await migrate(conn, where)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, asyncpg.InvalidSchemaNameError):
                raise StoreOpenError(
                    f"{where}: PostgreSQL has no schema to create the store's tables in "
                    f"({_reason(exc)}). Fix: the search_path in store.url names a schema that "
                    "does not exist: create it (CREATE SCHEMA name) or name one that exists."
                ) from None
            if isinstance(exc, asyncpg.PostgresError):
                raise StoreOpenError(
                    f"{where}: cannot set up the store's tables ({_reason(exc)}). Fix: check "
                    "that the user in store.url may create tables in its schema."
                ) from None
            raise
        if read_only and not current:
            await pool.close()
            return await cls.open(url, pool_size=pool_size)
        return cls(pool, where)

    async def write(self, op: Write[T]) -> T:
        """Run `op(connection)` in one transaction; commit when it returns, roll back on raise."""
        return await self._writes.run(self._transaction(op))

    async def _transaction(self, op: Write[T]) -> T:
        for attempt in range(1, _RETRIES + 1):
            try:
                async with self._pool.acquire() as conn, conn.transaction():
                    return await op(conn)
            except _RETRYABLE as exc:
                if attempt == _RETRIES:
                    raise
                log.info("store_write_retried", error=type(exc).__name__, attempt=attempt)
                await asyncio.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    async def transaction(self, op: Callable[[Sql], Awaitable[T]], *, urgent: bool = False) -> T:
        """`write`, with the connection as the shared store logic's `Sql`; a row refused for
        its unique key raises `DuplicateKey`. Every write has a pooled connection of its own,
        so an `urgent` one never waits behind others anyway."""

        async def run(conn: Any) -> T:
            try:
                return await op(PgSql(conn))
            except asyncpg.UniqueViolationError as exc:
                raise DuplicateKey(str(exc)) from None

        return await self.write(run)

    def reads(self) -> Sql:
        """The pool as the shared store logic's `Sql` (each read on any pooled connection)."""
        self._writes.check_open()
        return PgSql(self._pool)

    async def fetch_all(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        self._writes.check_open()
        return list(await self._pool.fetch(sql, *params))

    async def fetch_one(self, sql: str, params: Iterable[Any] = ()) -> Any:
        self._writes.check_open()
        return await self._pool.fetchrow(sql, *params)

    async def fetch_value(self, sql: str, params: Iterable[Any] = ()) -> Any:
        self._writes.check_open()
        return await self._pool.fetchval(sql, *params)

    async def session(self, op: Write[T]) -> T:
        """Run `op` on one connection of its own, outside any transaction (advisory locks)."""
        self._writes.check_open()
        async with self._pool.acquire() as conn:
            return await op(conn)

    async def aclose(self) -> None:
        """Let started writes finish, then close the pool. Safe to call twice."""
        if await self._writes.close():
            await self._pool.close()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT:.0f} s"
    return str(exc) or type(exc).__name__
