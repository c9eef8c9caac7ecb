"""The in-memory store: every store port on one `Tables`, opened like the SQL engines
(`bot.ports.stores.OpenStore`), for tests of the host and the CLI that need no database.

`open_memory_store(tables=...)` again on the same tables is a restart (or, with `shared`, another
replica): it reaches the same data. A shared store is a replica among those on its tables: it
runs its own work, adopts what no live replica owns (`MemoryWorkShare`) and takes duties one at a
time (`MemoryLeadership`); `die()` is its process killed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.ports.leadership import Leadership
from bot.ports.stores import OpenStore
from bot.testing.access import MemoryAccess
from bot.testing.console import MemoryConsoleBook
from bot.testing.cron import MemoryCronRuns
from bot.testing.history import MemoryChatBuffer, MemoryHistory
from bot.testing.inbox import MemoryInbox, MemoryOutbox, MemoryWorkShare
from bot.testing.keeping import MemoryApprovals, MemoryAttachments
from bot.testing.ledgers import MemoryTurnRecords, MemoryUsage
from bot.testing.memory import MemoryLongTerm
from bot.testing.tables import Opened, Tables

SCHEMA_VERSION = 1  # the tables are made as this code says: nothing to migrate


class MemoryLeadership(Leadership):
    """The Leadership port among the replicas on one `Tables`: a duty is held by one live
    replica at a time; when it closes or dies, a waiting one takes it."""

    def __init__(self, opened: Opened) -> None:
        self._opened = opened

    async def acquire(self, duty: str) -> None:
        tables = self._opened.tables
        while True:
            self._opened.check_open()
            holder = tables.duties.get(duty)
            if holder is None or holder == self._opened.owner or holder not in tables.live:
                tables.duties[duty] = self._opened.owner
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            tables.duty_waiters.append(waiter)
            await waiter

    def holds(self, duty: str) -> bool:
        tables = self._opened.tables
        return tables.duties.get(duty) == self._opened.owner and self._opened.owner in tables.live

    async def release(self, duty: str) -> None:
        if self.holds(duty):
            self._opened.free(duty)


@dataclass(frozen=True, slots=True, eq=False)
class MemoryStore:
    """The open in-memory store; each attribute implements one port, as `bot.store.sqlite`'s
    store does."""

    opened: Opened
    history: MemoryHistory
    memory: MemoryLongTerm
    records: MemoryTurnRecords
    buffer: MemoryChatBuffer
    inbox: MemoryInbox
    outbox: MemoryOutbox
    usage: MemoryUsage
    approvals: MemoryApprovals
    access: MemoryAccess
    attachments: MemoryAttachments
    console: MemoryConsoleBook
    leadership: MemoryLeadership | None
    share: MemoryWorkShare | None

    @property
    def tables(self) -> Tables:
        return self.opened.tables

    @property
    def where(self) -> str:
        return "memory"

    async def cron_runs(self, *, read_only: bool = False) -> MemoryCronRuns:
        self.opened.check_open()
        return MemoryCronRuns(self.opened)

    async def schema_version(self) -> int:
        return SCHEMA_VERSION

    def die(self) -> None:
        """This replica's process was killed: it stays "open" (nothing of it ran its close),
        but the others see it gone."""
        self.opened.die()

    async def aclose(self) -> None:
        self.opened.close()


if TYPE_CHECKING:
    _KEEPS_EVERY_PORT: type[OpenStore] = MemoryStore  # mypy checks it against the composite


def open_memory_store(
    settings: StoreSettings | None = None,
    memory: MemorySettings | None = None,
    *,
    attachments: AttachmentSettings | None = None,
    clock: Callable[[], float] = time.time,
    tables: Tables | None = None,
    shared: bool = False,
) -> MemoryStore:
    """A store on `tables` (new, empty ones when None, keeping time by `clock`); `shared`: one
    replica among several on them (else one process owns all of it, as with SQLite)."""
    settings = settings or StoreSettings()
    opened = Opened(tables or Tables(clock), shared=shared)
    history = MemoryHistory(opened, settings)
    records = MemoryTurnRecords(opened, settings.turn_records_keep, settings.turn_records_max_bytes)
    buffer = MemoryChatBuffer(opened)
    memories = MemoryLongTerm(opened, memory or MemorySettings())
    usage = MemoryUsage(opened)
    return MemoryStore(
        opened=opened,
        history=history,
        memory=memories,
        records=records,
        buffer=buffer,
        inbox=MemoryInbox(opened, buffer),
        outbox=MemoryOutbox(opened, history, records, usage=usage, memory=memories),
        usage=usage,
        approvals=MemoryApprovals(opened),
        access=MemoryAccess(opened),
        attachments=MemoryAttachments(opened, attachments or AttachmentSettings()),
        console=MemoryConsoleBook(opened),
        leadership=MemoryLeadership(opened) if shared else None,
        share=MemoryWorkShare(opened) if shared else None,
    )
