"""The PostgreSQL store: every store port on one shared database, for several `bot run` replicas;
the only importer of asyncpg.

Selected by `store.url` (SQLite's `bot.store` stays the embedded default). `open_pg_store(...)`
connects a pool, brings the schema up to date (forward migrations, `bot.pgstore.schema`) and hands
out one object per port, like `bot.store.open_store`; `aclose()` lets started writes finish and
closes the pool. Errors are the store branch of the one tree (`bot.errors`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.pgstore.claims import PgWorkShare
from bot.pgstore.cron_runs import PgCronRuns
from bot.pgstore.db import PgDatabase, shown_url
from bot.pgstore.fts import TSVECTOR
from bot.pgstore.leader import PgLeadership
from bot.pgstore.owners import Replica, duty, hold, new_owner
from bot.pgstore.schema import SCHEMA_VERSION, schema_version
from bot.sql.approvals import SqlApprovals
from bot.sql.attachments import Attachments
from bot.sql.buffer import ChatBuffer
from bot.sql.history import History
from bot.sql.inbox import Inbox, Outbox
from bot.sql.memory import Memory
from bot.sql.records import TurnRecords
from bot.sql.usage import UsageLedger

__all__ = ["SCHEMA_VERSION", "PgStore", "open_pg_store", "shown_url"]


@dataclass(frozen=True, slots=True, eq=False)
class PgStore:
    """The open store; each attribute implements one port of `bot.ports`."""

    db: PgDatabase
    history: History
    memory: Memory
    records: TurnRecords
    buffer: ChatBuffer
    inbox: Inbox
    outbox: Outbox
    leadership: PgLeadership
    share: PgWorkShare
    usage: UsageLedger
    approvals: SqlApprovals
    attachments: Attachments
    owner: str  # this replica, in the inbox and outbox (see bot.pgstore.owners)

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
) -> PgStore:
    """Connect to `url` (creating and migrating the schema as needed)."""
    db = await PgDatabase.open(url)
    owner = new_owner()
    leadership = PgLeadership(url)
    try:
        await hold(leadership, owner)
    except BaseException:
        await db.aclose()
        raise
    history = History(db, settings, clock)
    records = TurnRecords(db, settings.turn_records_keep, settings.turn_records_max_bytes)
    buffer = ChatBuffer(db, clock)
    replica = Replica(owner)
    memories = Memory(db, TSVECTOR, memory, clock)
    usage = UsageLedger(db, clock)
    return PgStore(
        db=db,
        history=history,
        memory=memories,
        records=records,
        buffer=buffer,
        inbox=Inbox(db, clock, buffer=buffer, owners=replica),
        outbox=Outbox(db, history, records, clock, owners=replica, usage=usage, memory=memories),
        leadership=leadership,
        share=PgWorkShare(db, owner),
        usage=usage,
        approvals=SqlApprovals(db),
        attachments=Attachments(db, attachments or AttachmentSettings(), clock),
        owner=owner,
    )
