"""What an open store offers whatever its engine (SQLite `bot.store.sqlite`, PostgreSQL
`bot.store.postgres`):
the core's store ports plus the operator views the CLI reads. Protocols only; the composition root
(`bot.cli.stored.open_configured`) picks the engine from `store.url` / `store.path`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from bot.ports.access import Pairing
from bot.ports.approvals import ApprovalRecords
from bot.ports.attachments import AttachmentStore
from bot.ports.console import ConsoleBook
from bot.ports.cron import ChatSchedule, CronRun, JobPause
from bot.ports.history import ChatBuffer, ConversationInfo, HistoryStore
from bot.ports.intake import Inbox, WorkShare
from bot.ports.leadership import Leadership
from bot.ports.memory import MemoryStore, StoredMemory
from bot.ports.outbox import Outbox
from bot.ports.records import RecordSummary, TurnRecords, UsageEntry, UsageLedger


class OperatorHistory(HistoryStore, Protocol):
    async def describe(self) -> list[ConversationInfo]: ...


class OperatorMemory(MemoryStore, Protocol):
    async def search(self, query: str, *, limit: int = 20) -> list[StoredMemory]: ...

    async def forget(self, memory_id: str) -> bool: ...

    async def count(self) -> int: ...


class OperatorRecords(TurnRecords, Protocol):
    async def show(self, turn_id: str) -> dict[str, Any] | None: ...

    async def recent(
        self,
        conversation: str | None = None,
        *,
        limit: int = 20,
        since: datetime | None = None,
    ) -> list[RecordSummary]:
        """The newest first; of one conversation, and only those started since `since`,
        when given."""


class OperatorUsage(UsageLedger, Protocol):
    async def rows(self, since: datetime | None = None) -> list[UsageEntry]: ...


class RunRecords(Protocol):
    """`bot.ports.cron.CronRuns` as a store hands it out, closable (the core names no channel)."""

    async def save(self, run: CronRun) -> None: ...

    async def latest(self, job: str) -> CronRun | None: ...

    async def last_slot(self, job: str) -> datetime | None: ...

    async def recent(self, job: str, limit: int = 20) -> list[CronRun]: ...

    async def interrupt_running(self, finished_at: datetime) -> int: ...

    async def claim_slot(self, job: str, slot: datetime) -> bool: ...

    async def pause(self, job: str, reason: str, at: datetime) -> bool: ...

    async def resume(self, job: str) -> bool: ...

    async def paused(self) -> list[JobPause]: ...

    async def add_schedule(
        self, schedule: ChatSchedule, *, per_place: int, per_person: int
    ) -> str: ...

    async def schedules(self, place: str | None = None) -> list[ChatSchedule]: ...

    async def remove_schedule(self, schedule_id: str) -> bool: ...

    async def aclose(self) -> None: ...


class OpenStore(Protocol):
    @property
    def history(self) -> OperatorHistory: ...

    @property
    def memory(self) -> OperatorMemory: ...

    @property
    def records(self) -> OperatorRecords: ...

    @property
    def buffer(self) -> ChatBuffer: ...

    @property
    def usage(self) -> OperatorUsage: ...

    @property
    def attachments(self) -> AttachmentStore: ...

    @property
    def inbox(self) -> Inbox: ...

    @property
    def approvals(self) -> ApprovalRecords: ...

    @property
    def access(self) -> Pairing:
        """Pairing: codes given out and the people admitted with them."""

    @property
    def outbox(self) -> Outbox: ...

    @property
    def console(self) -> ConsoleBook:
        """The operator console's sessions, refused logins and audit."""

    @property
    def leadership(self) -> Leadership | None:
        """Who runs what must run once (Telegram polling); None when one process is all."""

    @property
    def share(self) -> WorkShare | None:
        """Which replica runs which conversation; None when one process is all."""

    @property
    def where(self) -> str:
        """Where the data lives, printable (a file path, or a URL without a password)."""

    async def cron_runs(self, *, read_only: bool = False) -> RunRecords: ...

    async def schema_version(self) -> int: ...

    async def aclose(self) -> None: ...
