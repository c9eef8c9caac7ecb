"""The database handle: one owner-only SQLite file in WAL mode, one writer and one reader.

Writes are serialized through one connection and an asyncio lock (`Database.write`); other
processes (the CLI next to `bot run`) wait on SQLite's busy timeout. Writes that queue up while
another commits are committed together (group commit): one BEGIN IMMEDIATE transaction, each write
in a savepoint of its own so that one that fails undoes only its own changes, and every caller
answered only after the commit. An urgent write (a part's "delivered" mark: until it is
durable a crash posts the part again) is not queued behind them: whoever takes the lock next
commits the urgent writes first, in a transaction of their own. Reads go through a second,
query-only connection, which in WAL mode sees only committed transactions and never waits for
the writer.

`SqliteDatabase.open_read_only` is the inspection commands' handle (`bot turns`, `bot history
show`...): one `mode=ro` connection that neither migrates nor takes the write lock, so it answers
while a running host holds it; its writes fail.

A write once started is shielded from cancellation (`bot.store.sql.writes`): it commits or rolls
back as a whole, so a cancelled turn can never leave a half-written transaction or a held lock
behind.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import aiosqlite
import structlog

from bot.errors import DuplicateKey, StoreOpenError
from bot.ports.sql import Sql
from bot.store.sql.writes import ShieldedWrites
from bot.store.sqlite.schema import migrate
from bot.store.sqlite.sql import SqliteSql

log = structlog.get_logger(__name__)

T = TypeVar("T")
Write = Callable[[aiosqlite.Connection], Awaitable[T]]

BUSY_TIMEOUT_MS = 10_000
SYNCHRONOUS = frozenset({"normal", "full"})
_PRIVATE_FILE = 0o600
# The errors SQLite gives a row refused for a unique key (the primary key is one).
_UNIQUE = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})
_PRIVATE_FOLDER = 0o700


@dataclass
class _Queued(Generic[T]):
    """One write waiting for its group's transaction, and where its result goes."""

    op: Write[T]
    done: asyncio.Future[T]


class SqliteDatabase:
    """The open database. Create it with `await SqliteDatabase.open(path)`."""

    def __init__(self, path: Path, writer: aiosqlite.Connection, reader: aiosqlite.Connection):
        self.path = path
        self._writer = writer
        self._reader = reader
        self._lock = asyncio.Lock()
        self._queued: list[_Queued[Any]] = []
        self._urgent: list[_Queued[Any]] = []
        self._writes = ShieldedWrites(str(path))

    @classmethod
    async def open(cls, path: Path, *, synchronous: str = "normal") -> SqliteDatabase:
        """Open (creating and migrating) the file; `synchronous` is "normal" or "full" (see
        `store.synchronous`: what a commit survives)."""
        path = await asyncio.to_thread(_prepare_files, path)
        writer = await _connect(path, query_only=False, synchronous=synchronous)
        try:
            await writer.execute("PRAGMA journal_mode = WAL")
            await migrate(writer, str(path))
            reader = await _connect(path, query_only=True)
        except BaseException:
            await writer.close()
            raise
        await asyncio.to_thread(_restrict_companions, path)
        return cls(path, writer, reader)

    @classmethod
    async def open_read_only(cls, path: Path) -> SqliteDatabase:
        """Open an existing file to read it: never created, migrated or locked for writing."""
        path, uri = await asyncio.to_thread(_read_only_uri, path)
        try:
            conn = await aiosqlite.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreOpenError(
                f"{path}: cannot open the database to read it ({exc}). Fix: check that "
                "store.path names the bot's store file and that this user may read it."
            ) from exc
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA query_only = ON")
        return cls(path, conn, conn)

    async def write(self, op: Write[T], *, urgent: bool = False) -> T:
        """Run `op` in one write transaction; commit when it returns, roll back when it raises.
        `urgent`: committed before the writes queued ahead of it (see the module's docstring)."""
        return await self._writes.run(self._transaction(op, urgent))

    async def _transaction(self, op: Write[T], urgent: bool = False) -> T:
        mine: _Queued[T] = _Queued(op, asyncio.get_running_loop().create_future())
        (self._urgent if urgent else self._queued).append(mine)
        async with self._lock:
            if self._urgent:  # whoever holds the lock first commits what must not wait
                group, self._urgent = self._urgent, []
                await self._commit(group)
            if not mine.done.done():  # not yet committed in a group another write took
                group, self._queued = self._queued, []
                await self._commit(group)
        return mine.done.result()

    async def _commit(self, group: list[_Queued[Any]]) -> None:
        """Run the queued writes in one transaction and answer each after the commit: with its
        result, with its own error (its savepoint undone), or with the commit's error."""
        writer = self._writer
        answers: list[tuple[_Queued[Any], Any, BaseException | None]] = []
        try:
            await writer.execute("BEGIN IMMEDIATE")
            if len(group) == 1:
                answers.append((group[0], await group[0].op(writer), None))
            else:
                for queued in group:
                    answers.append(await _in_savepoint(writer, queued))
            await writer.execute("COMMIT")
        except BaseException as exc:
            # A failed COMMIT (disk full, I/O error) leaves the transaction open; close it so
            # the next write does not find itself nested inside this one.
            if writer.in_transaction:
                await writer.execute("ROLLBACK")
            for queued in group:
                if not queued.done.done():
                    queued.done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for queued, result, error in answers:
            if error is None:
                queued.done.set_result(result)
            else:
                queued.done.set_exception(error)

    async def transaction(self, op: Callable[[Sql], Awaitable[T]], *, urgent: bool = False) -> T:
        """`write`, with the connection as the shared store logic's `Sql`; a row refused for
        its unique key raises `DuplicateKey`."""

        async def run(conn: aiosqlite.Connection) -> T:
            try:
                return await op(SqliteSql(conn))
            except sqlite3.IntegrityError as exc:
                if getattr(exc, "sqlite_errorname", "") in _UNIQUE:
                    raise DuplicateKey(str(exc)) from None
                raise

        return await self.write(run, urgent=urgent)

    def reads(self) -> Sql:
        """The query-only connection as the shared store logic's `Sql`."""
        self._writes.check_open()
        return SqliteSql(self._reader)

    async def fetch_all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        self._writes.check_open()
        return list(await self._reader.execute_fetchall(sql, tuple(params)))

    async def fetch_one(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def stream(self, sql: str, size: int = 1000) -> AsyncIterator[list[sqlite3.Row]]:
        """The rows of one query (one consistent snapshot), `size` at a time."""
        self._writes.check_open()
        async with self._reader.execute(sql) as cursor:
            while rows := list(await cursor.fetchmany(size)):
                yield rows

    async def integrity_check(self) -> str:
        row = await self.fetch_one("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"

    async def aclose(self) -> None:
        """Let started writes finish, then close both connections. Safe to call twice."""
        if await self._writes.close():
            await self._reader.close()
            if self._writer is not self._reader:
                await self._writer.close()


async def _in_savepoint(
    writer: aiosqlite.Connection, queued: _Queued[T]
) -> tuple[_Queued[T], T | None, Exception | None]:
    """One write of a group, in a savepoint: when it raises, only its own changes are undone."""
    await writer.execute("SAVEPOINT grouped")
    try:
        result = await queued.op(writer)
    except Exception as exc:
        await writer.execute("ROLLBACK TO SAVEPOINT grouped")
        await writer.execute("RELEASE SAVEPOINT grouped")
        return queued, None, exc
    await writer.execute("RELEASE SAVEPOINT grouped")
    return queued, result, None


async def _connect(
    path: Path, *, query_only: bool, synchronous: str = "normal"
) -> aiosqlite.Connection:
    try:
        # isolation_level=None: no implicit transactions; `Database.write` opens them explicitly.
        conn = await aiosqlite.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreOpenError(
            f"{path}: cannot open the database ({exc}). Fix: check that store.path points at a "
            "writable location owned by this user."
        ) from exc
    conn.row_factory = sqlite3.Row
    await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # In WAL mode NORMAL commits survive a crash of the process (the exactly-once promise) and
    # leave the fsync to checkpoints; FULL waits for the disk at every commit, surviving power
    # loss too. Both keep the database consistent.
    if synchronous not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {sorted(SYNCHRONOUS)}, not {synchronous!r}")
    await conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    if query_only:
        await conn.execute("PRAGMA query_only = ON")
    return conn


def _read_only_uri(path: Path) -> tuple[Path, str]:
    path = path.expanduser()
    return path, f"{path.resolve().as_uri()}?mode=ro"


def _prepare_files(path: Path) -> Path:
    """Create the folder (0700) and the file (0600) before SQLite does, so neither is ever
    readable by others, not even for the moment between creation and a chmod."""
    path = path.expanduser()
    try:
        _make_private_folders(path.parent)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, _PRIVATE_FILE)
        os.close(fd)
    except OSError as exc:
        raise StoreOpenError(
            f"{path}: cannot create the database file ({exc.strerror}). Fix: set store.path to "
            "a location this user can write, or create its folder with mode 0700."
        ) from exc
    _restrict(path)
    if stat.S_IMODE(path.parent.stat().st_mode) & 0o077:
        log.warning("store_folder_not_private", folder=str(path.parent))
    return path


def _make_private_folders(folder: Path) -> None:
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        created.mkdir(mode=_PRIVATE_FOLDER)
        os.chmod(created, _PRIVATE_FOLDER)  # mkdir's mode is filtered by the umask


def _restrict_companions(path: Path) -> None:
    """SQLite gives -wal and -shm the database file's mode; tighten any left by an older run."""
    for suffix in ("-wal", "-shm"):
        _restrict(path.with_name(path.name + suffix))


def _restrict(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & 0o077:
        os.chmod(path, _PRIVATE_FILE)
        log.warning("store_file_made_private", file=str(path), was=oct(mode))
