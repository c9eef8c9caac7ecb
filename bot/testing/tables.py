"""The in-memory store's data: every table one `Tables` object, shared by each store opened on
it (as processes share a file or a database), and what each open store is (`Opened`).

Each operation on the tables runs without awaiting between its first read and its last write, so
on one event loop it is a transaction: it checks everything that can refuse it first (a closed
store, a table told to fail, a duplicate key), then writes all of it. A test makes a table's
writes fail with `Tables.failing` (or only the next few with `Tables.fail_next`), where the SQL
engines' tests rename the table away.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from bot.errors import StoreClosedError, StoreFault
from bot.ports.access import Admitted
from bot.ports.approvals import Approval
from bot.ports.console import AuditEntry, ConsoleSession
from bot.ports.cron import ChatSchedule, CronRun, JobPause
from bot.ports.outbox import InboxState, OutboxPart
from bot.ports.records import UsageEntry
from bot.store.sql.history import Staged
from bot.turns import Origin, TurnRequest


@dataclass
class CodeRow:
    """A pairing code given out (`bot.store.sql.access`'s access_codes row)."""

    person: str
    label: str
    asked_at: float
    expires_at: float
    used_at: float | None = None


@dataclass
class ItemRow:
    item_id: int
    request: TurnRequest
    source: str
    accepted_at: float
    attempts: int = 0
    state: InboxState = InboxState.PENDING
    finished_at: float | None = None
    owner: str = ""  # "" until a replica adopts its conversation
    consumed_by: str | None = None  # the turn that took it in beside its own (SPEC §19)

    @property
    def conversation_key(self) -> str:
        return self.request.conversation_key


@dataclass
class PartRow:
    row_id: int
    part: OutboxPart
    created_at: float
    owner: str = ""
    state: str = "pending"  # "delivered", "abandoned"
    error: str | None = None
    settled_at: float | None = None


@dataclass
class ConversationRow:
    last_active: float
    window: list[Staged]  # bounded, encoded entries, oldest first

    @property
    def bytes(self) -> int:
        return sum(len(item.body.encode("utf-8")) for item in self.window)


@dataclass(frozen=True)
class BufferRow:
    row_id: int
    added_at: float
    body: str  # `bot.store.sql.buffer.encode_message`


@dataclass
class MemoryRow:
    row_id: int
    conversation_key: str
    surface: str
    person: str | None
    text: str
    captured_at: float
    said_from: int
    said_to: int
    origin: Origin = Origin.UNLISTED


@dataclass
class Span:
    """A person's participation in a surface, from `since` to `until` (unix seconds)."""

    person: str
    surface: str
    since: float
    until: float


@dataclass
class AttachmentRow:
    media_type: str
    data: bytes
    used_at: float


@dataclass
class Tables:
    """Everything a store holds. `live` names the open stores (replicas) that are running: a
    store leaves it when it closes or when a test says it died (`Opened.die`)."""

    clock: Callable[[], float]
    marks: dict[tuple[str, str], float] = field(default_factory=dict)
    items: dict[int, ItemRow] = field(default_factory=dict)
    parts: dict[str, PartRow] = field(default_factory=dict)
    streams: dict[tuple[str, int], tuple[str, float]] = field(default_factory=dict)
    conversations: dict[str, ConversationRow] = field(default_factory=dict)
    chat_buffer: dict[str, list[BufferRow]] = field(default_factory=dict)
    memories: dict[int, MemoryRow] = field(default_factory=dict)
    participation: list[Span] = field(default_factory=list)
    records: dict[str, tuple[int, str]] = field(default_factory=dict)  # turn id -> (seq, body)
    usage: dict[str, UsageEntry] = field(default_factory=dict)
    notices: dict[tuple[str, str], float] = field(default_factory=dict)
    attachments: dict[str, AttachmentRow] = field(default_factory=dict)
    attachment_refs: set[tuple[str, str]] = field(default_factory=set)  # (key, content id)
    approvals: dict[str, Approval] = field(default_factory=dict)
    access_codes: dict[str, CodeRow] = field(default_factory=dict)  # pairing, by digest
    access_people: dict[str, Admitted] = field(default_factory=dict)
    cron_runs: dict[str, tuple[int, CronRun]] = field(default_factory=dict)  # id -> (seq, run)
    cron_slots: dict[tuple[str, float], float] = field(default_factory=dict)
    cron_pauses: dict[str, JobPause] = field(default_factory=dict)
    chat_schedules: dict[str, ChatSchedule] = field(default_factory=dict)
    console_sessions: dict[str, ConsoleSession] = field(default_factory=dict)
    console_logins: list[tuple[str, float]] = field(default_factory=list)
    console_audit: list[AuditEntry] = field(default_factory=list)
    live: set[str] = field(default_factory=set)
    duties: dict[str, str] = field(default_factory=dict)  # leadership: duty -> holder
    duty_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    failing_tables: set[str] = field(default_factory=set)
    failing_writes: dict[str, int] = field(default_factory=dict)  # table -> writes left to fail
    _ids: dict[str, Iterator[int]] = field(default_factory=dict)

    def next_id(self, table: str) -> int:
        """A new row id of `table`: 1, 2, 3... never reused (as SQL's sequences only grow)."""
        return next(self._ids.setdefault(table, itertools.count(1)))

    def check(self, *tables: str) -> None:
        """Refuse a write to any of `tables` a test told to fail."""
        for table in tables:
            if table in self.failing_tables:
                raise StoreFault(f"writes to {table} fail (Tables.failing)")
            if self.failing_writes.get(table, 0) > 0:
                self.failing_writes[table] -= 1
                raise StoreFault(f"a write to {table} fails (Tables.fail_next)")

    def fail_next(self, table: str, times: int) -> None:
        """The next `times` writes to `table` raise StoreFault and write nothing (a store that
        refuses for a while, then takes writes again); `failing_writes` counts down what is left."""
        self.failing_writes[table] = times

    @contextmanager
    def failing(self, table: str) -> Iterator[None]:
        """While inside, every write to `table` raises StoreFault and writes nothing."""
        self.failing_tables.add(table)
        try:
            yield
        finally:
            self.failing_tables.discard(table)


class Opened:
    """One store opened on the tables: its owner name (a replica's, where replicas share
    them) and whether it is still open."""

    def __init__(self, tables: Tables, *, shared: bool) -> None:
        self.tables = tables
        self.shared = shared
        self.owner = secrets.token_hex(8) if shared else ""
        self.closed = False
        if shared:
            tables.live.add(self.owner)

    def check_open(self) -> None:
        if self.closed:
            raise StoreClosedError(
                "memory store: the store is closed. Fix: open it again with open_memory_store()."
            )

    def write(self, *tables: str) -> Tables:
        """The tables, for a write to `tables` (refused when closed or told to fail)."""
        self.check_open()
        self.tables.check(*tables)
        return self.tables

    def close(self) -> None:
        self.closed = True
        self.die()

    def die(self) -> None:
        """This replica is gone (its process was killed): what it owned is up for adoption
        and the duties it held are free."""
        self.tables.live.discard(self.owner)
        for duty in [d for d, holder in self.tables.duties.items() if holder == self.owner]:
            self.free(duty)

    def free(self, duty: str) -> None:
        """Nobody holds `duty` now: wake whoever waits for it."""
        self.tables.duties.pop(duty, None)
        waiters, self.tables.duty_waiters = self.tables.duty_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def mine(self, owner: str) -> bool:
        """Whether a pending item named `owner` is this store's to run."""
        return not self.shared or owner in ("", self.owner)

    def live_other(self, owner: str) -> bool:
        return owner not in ("", self.owner) and owner in self.tables.live
