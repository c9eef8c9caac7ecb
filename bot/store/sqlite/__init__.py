"""The durable store: one SQLite file holding history, memory, turn records, the inbox (with its
dedupe marks), the outbox, the chat buffer, per-turn usage and attachments; the only importer of
aiosqlite.

The composition root opens it once with `open_store(...)` and hands its attributes to whoever
needs each port; `aclose()` lets started writes finish and closes the file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.errors import StoreOpenError
from bot.store.sql.access import SqlAccess
from bot.store.sql.approvals import SqlApprovals
from bot.store.sql.attachments import SqlAttachments
from bot.store.sql.buffer import SqlChatBuffer
from bot.store.sql.console import SqlConsoleBook
from bot.store.sql.history import SqlHistory
from bot.store.sql.inbox import SqlInbox, SqlOutbox
from bot.store.sql.memory import SqlMemory
from bot.store.sql.records import SqlTurnRecords
from bot.store.sql.usage import SqlUsageLedger
from bot.store.sqlite.cron_runs import SqliteCronRuns, open_cron_runs
from bot.store.sqlite.db import SqliteDatabase
from bot.store.sqlite.fts import FTS5
from bot.store.sqlite.schema import SCHEMA_VERSION
from bot.store.sqlite.usage import USAGE_TABLES, ensure_usage_tables

__all__ = ["SqliteStore", "existing_database", "open_store"]


@dataclass(frozen=True, slots=True, eq=False)
class SqliteStore:
    """The open store; each attribute implements one port of `bot.ports`."""

    db: SqliteDatabase
    history: SqlHistory
    memory: SqlMemory
    records: SqlTurnRecords
    buffer: SqlChatBuffer
    inbox: SqlInbox
    outbox: SqlOutbox
    usage: SqlUsageLedger
    approvals: SqlApprovals
    access: SqlAccess
    attachments: SqlAttachments
    console: SqlConsoleBook

    @property
    def leadership(self) -> None:
        """One process per file: it always leads, nothing to elect."""
        return None

    @property
    def share(self) -> None:
        """One process per file: all the inbox's work is its own."""
        return None

    @property
    def where(self) -> str:
        return str(self.db.path)

    async def cron_runs(self, *, read_only: bool = False) -> SqliteCronRuns:
        """Run records on a connection of their own to the same file."""
        return await open_cron_runs(self.db.path, read_only=read_only)

    async def schema_version(self) -> int:
        row = await self.db.fetch_one("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def aclose(self) -> None:
        await self.db.aclose()


async def open_store(
    settings: StoreSettings,
    memory: MemorySettings,
    *,
    attachments: AttachmentSettings | None = None,
    clock: Callable[[], float] = time.time,
    read_only: bool = False,
) -> SqliteStore:
    """Open (creating and migrating as needed) the database at `settings.path`.

    `read_only` opens an existing, up-to-date file without ever taking the write lock (a store
    an older version wrote is opened as usual, to migrate it). `clock` gives unix seconds; tests
    pass their own to age conversations and events.
    """
    db = await _read_only(settings.path) if read_only else None
    if db is None:
        db = await SqliteDatabase.open(settings.path, synchronous=settings.synchronous)
        try:
            await ensure_usage_tables(db)
        except BaseException:
            await db.aclose()
            raise
    history = SqlHistory(db, settings, clock)
    records = SqlTurnRecords(db, settings.turn_records_keep, settings.turn_records_max_bytes)
    buffer = SqlChatBuffer(db, clock)
    memories = SqlMemory(db, FTS5, memory, clock)
    usage = SqlUsageLedger(db, clock)
    return SqliteStore(
        db=db,
        history=history,
        memory=memories,
        records=records,
        buffer=buffer,
        inbox=SqlInbox(db, clock, buffer=buffer),
        outbox=SqlOutbox(db, history, records, clock, usage=usage, memory=memories),
        usage=usage,
        approvals=SqlApprovals(db),
        access=SqlAccess(db, clock),
        attachments=SqlAttachments(db, attachments or AttachmentSettings(), clock),
        console=SqlConsoleBook(db),
    )


async def _read_only(path: Path) -> SqliteDatabase | None:
    """The file opened read-only, or None when its schema is not this version's yet."""
    db = await SqliteDatabase.open_read_only(path)
    try:
        version = await db.fetch_one("PRAGMA user_version")
        tables = await db.fetch_all(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)", USAGE_TABLES
        )
    except BaseException:
        await db.aclose()
        raise
    if version is not None and int(version[0]) == SCHEMA_VERSION and len(tables) == 2:
        return db
    await db.aclose()
    return None


def existing_database(settings: StoreSettings) -> Path:
    """The database path, for commands that inspect a store and must not create an empty one."""
    path = settings.path.expanduser()
    if not path.is_file():
        raise StoreOpenError(
            f"{path}: no database here yet. Fix: check store.path in the config (or pass "
            "--config); the file is created when the bot first runs a turn."
        )
    return path
