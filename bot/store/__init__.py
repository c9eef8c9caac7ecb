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
from bot.sql.approvals import SqlApprovals
from bot.sql.attachments import Attachments
from bot.sql.buffer import ChatBuffer
from bot.sql.history import History
from bot.sql.inbox import Inbox, Outbox
from bot.sql.memory import Memory
from bot.sql.records import TurnRecords
from bot.sql.usage import UsageLedger
from bot.store.cron_runs import SqliteCronRuns, open_cron_runs
from bot.store.db import Database
from bot.store.fts import FTS5
from bot.store.usage import ensure_usage_tables

__all__ = ["Store", "existing_database", "open_store"]


@dataclass(frozen=True, slots=True, eq=False)
class Store:
    """The open store; each attribute implements one port of `bot.ports` or `bot.inbox`."""

    db: Database
    history: History
    memory: Memory
    records: TurnRecords
    buffer: ChatBuffer
    inbox: Inbox
    outbox: Outbox
    usage: UsageLedger
    approvals: SqlApprovals
    attachments: Attachments

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
) -> Store:
    """Open (creating and migrating as needed) the database at `settings.path`.

    `clock` gives unix seconds; tests pass their own to age conversations and events.
    """
    db = await Database.open(settings.path, synchronous=settings.synchronous)
    try:
        await ensure_usage_tables(db)
    except BaseException:
        await db.aclose()
        raise
    history = History(db, settings, clock)
    records = TurnRecords(db, settings.turn_records_keep, settings.turn_records_max_bytes)
    buffer = ChatBuffer(db, clock)
    memories = Memory(db, FTS5, memory, clock)
    usage = UsageLedger(db, clock)
    return Store(
        db=db,
        history=history,
        memory=memories,
        records=records,
        buffer=buffer,
        inbox=Inbox(db, clock, buffer=buffer),
        outbox=Outbox(db, history, records, clock, usage=usage, memory=memories),
        usage=usage,
        approvals=SqlApprovals(db),
        attachments=Attachments(db, attachments or AttachmentSettings(), clock),
    )


def existing_database(settings: StoreSettings) -> Path:
    """The database path, for commands that inspect a store and must not create an empty one."""
    path = settings.path.expanduser()
    if not path.is_file():
        raise StoreOpenError(
            f"{path}: no database here yet. Fix: check store.path in the config (or pass "
            "--config); the file is created when the bot first runs a turn."
        )
    return path
