"""The PostgreSQL store: every store port on one shared database, for several `bot run` replicas;
the only importer of asyncpg.

Selected by `store.url` (SQLite's `bot.store.sqlite` stays the embedded default).
`open_pg_store(...)` connects a pool, brings the schema up to date (forward migrations,
`bot.store.postgres.schema`) and hands out one object per port, like `bot.store.sqlite.open_store`;
`aclose()` lets started writes finish and closes the pool. Errors are the store branch of the one
tree (`bot.errors`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.store.postgres.claims import PgWorkShare
from bot.store.postgres.cron_runs import PgCronRuns
from bot.store.postgres.db import POOL_SIZE, PgDatabase, shown_url
from bot.store.postgres.fts import TSVECTOR
from bot.store.postgres.leader import PgLeadership
from bot.store.postgres.owners import Replica, duty, hold, new_owner
from bot.store.postgres.schema import SCHEMA_VERSION, schema_version
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

__all__ = ["SCHEMA_VERSION", "PgStore", "open_pg_store", "shown_url"]


@dataclass(frozen=True, slots=True, eq=False)
class PgStore:
    """The open store; each attribute implements one port of `bot.ports`."""

    db: PgDatabase
    history: SqlHistory
    memory: SqlMemory
    records: SqlTurnRecords
    buffer: SqlChatBuffer
    inbox: SqlInbox
    outbox: SqlOutbox
    leadership: PgLeadership
    share: PgWorkShare
    usage: SqlUsageLedger
    approvals: SqlApprovals
    access: SqlAccess
    attachments: SqlAttachments
    console: SqlConsoleBook
    owner: str  # this replica, in the inbox and outbox (see bot.store.postgres.owners)

    @property
    def where(self) -> str:
        return self.db.where

    async def cron_runs(self, *, read_only: bool = False) -> PgCronRuns:
        """Run records in the same database (they share the store's pool)."""
        return PgCronRuns(self.db)

    async def schema_version(self) -> int:
        return await self.db.session(schema_version)

    async def aclose(self) -> None:
        await self.db.aclose()
        await self.leadership.release(duty(self.owner))


async def open_pg_store(
    url: str,
    settings: StoreSettings,
    memory: MemorySettings,
    *,
    attachments: AttachmentSettings | None = None,
    clock: Callable[[], float] = time.time,
    read_only: bool = False,
) -> PgStore:
    """Connect to `url` (creating and migrating the schema as needed). `read_only` for the
    inspection commands: read-only transactions, no migration, no replica heartbeat."""
    db = await PgDatabase.open(url, pool_size=2 if read_only else POOL_SIZE, read_only=read_only)
    owner = new_owner()
    leadership = PgLeadership(url)
    try:
        if not read_only:
            await hold(leadership, owner)
    except BaseException:
        await db.aclose()
        raise
    history = SqlHistory(db, settings, clock)
    records = SqlTurnRecords(db, settings.turn_records_keep, settings.turn_records_max_bytes)
    buffer = SqlChatBuffer(db, clock)
    replica = Replica(owner)
    memories = SqlMemory(db, TSVECTOR, memory, clock)
    usage = SqlUsageLedger(db, clock)
    return PgStore(
        db=db,
        history=history,
        memory=memories,
        records=records,
        buffer=buffer,
        inbox=SqlInbox(db, clock, buffer=buffer, owners=replica),
        outbox=SqlOutbox(db, history, records, clock, owners=replica, usage=usage, memory=memories),
        leadership=leadership,
        share=PgWorkShare(db, owner),
        usage=usage,
        approvals=SqlApprovals(db),
        access=SqlAccess(db, clock),
        attachments=SqlAttachments(db, attachments or AttachmentSettings(), clock),
        console=SqlConsoleBook(db),
        owner=owner,
    )
