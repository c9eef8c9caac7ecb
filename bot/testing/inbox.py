"""The inbox, the outbox and the work share of the in-memory store (ports: `bot.ports.intake`,
`bot.ports.outbox`), with
the SQL engines' semantics (`bot.store.sql.inbox`, `bot.store.postgres.claims`): marks dedupe under
their source, items stay pending in accepted order until a terminal state, a publication writes
history, parts, the item's state, its record, its charge and its capture as one, and where replicas
share the tables (`shared`), each runs only its own work and adopts what nobody live owns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import structlog

from bot.errors import ClaimLost, DuplicateKey, StoreFault
from bot.ports.history import Chatter
from bot.ports.intake import Adopted, Inbox, InboxItem, WorkShare
from bot.ports.outbox import InboxState, Outbox, OutboxPart, Publication
from bot.store.sql.inbox import (
    DEFAULT_KEEP,
    DEFAULT_MAX_AGE_DAYS,
    PRUNE_EVERY,
    SETTLED_MAX_AGE_DAYS,
)
from bot.testing.history import MemoryChatBuffer, MemoryHistory
from bot.testing.ledgers import MemoryTurnRecords, MemoryUsage
from bot.testing.memory import MemoryLongTerm
from bot.testing.tables import ItemRow, Opened, PartRow
from bot.turns import TurnRequest

log = structlog.get_logger(__name__)

_DAY = 86_400.0


class MemoryInbox(Inbox):
    """The Inbox port in memory (plus `state` and `prune`, as `bot.store.sql.inbox.Inbox` has)."""

    def __init__(
        self,
        opened: Opened,
        buffer: MemoryChatBuffer,
        *,
        keep: int = DEFAULT_KEEP,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ) -> None:
        self._opened = opened
        self._buffer = buffer
        self._keep = keep
        self._max_age = max_age_days * _DAY
        self._since_prune = 0

    async def accept(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> InboxItem | None:
        tables = self._opened.write("events", "inbox")
        if consumes is not None:
            tables.check("chat_buffer")
        item = None
        if self._mark(source, marks):
            row = ItemRow(tables.next_id("inbox"), request, source, tables.clock())
            tables.items[row.item_id] = row
            item = InboxItem(row.item_id, request)
            if consumes is not None:
                self._buffer.drop_upto(request.conversation_key, consumes)
        self._prune_now_and_then()
        return item

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        self._opened.write("events", *(("chat_buffer",) if chatter is not None else ()))
        new = self._mark(source, marks)
        if new and chatter is not None:
            self._buffer.add(chatter)
        self._prune_now_and_then()
        return new

    async def claim(self, item_id: int) -> int:
        row = self._opened.write("inbox").items.get(item_id)
        if row is None:
            return 0
        row.attempts += 1
        return row.attempts

    async def pending(self) -> list[InboxItem]:
        """Unfinished items that are this store's to run (all of them unless `shared`)."""
        self._opened.check_open()
        return [
            InboxItem(row.item_id, row.request, row.attempts)
            for row in sorted(self._opened.tables.items.values(), key=lambda r: r.item_id)
            if row.state is InboxState.PENDING and self._opened.mine(row.owner)
        ]

    async def state(self, item_id: int) -> InboxState | None:
        """The item's state (for tests and inspection); None when there is no such item."""
        row = self._opened.tables.items.get(item_id)
        return None if row is None else row.state

    async def consumed_by(self, item_id: int) -> str | None:
        """The turn that took the item in beside its own (for tests and inspection)."""
        row = self._opened.tables.items.get(item_id)
        return None if row is None else row.consumed_by

    async def prune(self) -> None:
        self._opened.write("events", "inbox", "outbox")
        self._prune()

    def _mark(self, source: str, marks: Sequence[str]) -> bool:
        tables = self._opened.tables
        now = tables.clock()
        new = True
        for mark in marks:
            if (source, mark) in tables.marks:
                new = False
            else:
                tables.marks[(source, mark)] = now
        return new

    def _prune_now_and_then(self) -> None:
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
            self._prune()

    def _prune(self) -> None:
        tables = self._opened.tables
        now = tables.clock()
        kept = sorted(tables.marks.items(), key=lambda mark: mark[1], reverse=True)
        if len(kept) >= self._keep:
            # As the SQL engines: the newest `keep` by time survive (ties with the last kept stay).
            oldest_kept = kept[self._keep - 1][1]
            kept = [mark for mark in kept if mark[1] >= oldest_kept]
        tables.marks = {mark: at for mark, at in kept if at >= now - self._max_age}
        settled = now - SETTLED_MAX_AGE_DAYS * _DAY
        for item_id in [
            row.item_id
            for row in tables.items.values()
            if row.state is not InboxState.PENDING and (row.finished_at or now) < settled
        ]:
            del tables.items[item_id]
        for part_id in [
            row.part.part_id
            for row in tables.parts.values()
            if row.state != "pending" and (row.settled_at or now) < settled
        ]:
            del tables.parts[part_id]
        for stream in [s for s, (_, opened_at) in tables.streams.items() if opened_at < settled]:
            del tables.streams[stream]


class MemoryOutbox(Outbox):
    """The Outbox port in memory: a publication is checked whole, then written whole."""

    def __init__(
        self,
        opened: Opened,
        history: MemoryHistory,
        records: MemoryTurnRecords,
        *,
        usage: MemoryUsage | None = None,
        memory: MemoryLongTerm | None = None,
    ) -> None:
        self._opened = opened
        self._history = history
        self._records = records
        self._usage = usage
        self._memory = memory
        self.publications: list[Publication] = []  # every publication written, in order

    async def publish(self, publication: Publication) -> None:
        key = publication.conversation_key
        fresh = self._history.stage(publication.entries)
        written = bool(fresh) or publication.replace
        tables = self._opened.write(*self._tables_of(publication, written))
        part_ids = [part.part_id for part in publication.parts]
        if len(set(part_ids)) < len(part_ids) or any(p in tables.parts for p in part_ids):
            raise DuplicateKey(f"outbox: a part id is stored twice in {part_ids}")
        item = None
        if publication.item_id is not None and publication.state is not None:
            item = tables.items.get(publication.item_id)
        consumed = [tables.items[i] for i in publication.consumed if i in tables.items]
        for mine in [item, *consumed]:
            theirs = mine is not None and mine.owner not in ("", self._opened.owner)
            if mine is not None and self._opened.shared and theirs:
                raise ClaimLost(f"inbox item {mine.item_id} is another replica's now")
        # Checked: from here on nothing refuses, so all of it is written.
        if written:
            self._history.write(key, fresh, publication.replace)
        now = tables.clock()
        for part in publication.parts:
            row = PartRow(tables.next_id("outbox"), part, now, owner=self._opened.owner)
            tables.parts[part.part_id] = row
        for turn_id in {part.turn_id for part in publication.parts}:
            for stream in [s for s in tables.streams if s[0] == turn_id]:
                del tables.streams[stream]
        if item is not None and publication.state is not None:
            item.state, item.finished_at = publication.state, now
        by = publication.record.turn_id if publication.record is not None else None
        for taken in consumed:
            taken.state, taken.finished_at, taken.consumed_by = InboxState.CONSUMED, now, by
        if publication.record is not None:
            self._records.write(publication.record)
        if publication.usage is not None and self._usage is not None:
            self._usage.write(publication.usage)
        if publication.capture is not None and self._memory is not None:
            try:
                self._memory.write(publication.capture)
            except StoreFault as exc:  # undone alone (it wrote nothing): the publication stands
                log.warning("memory_capture_failed", error=type(exc).__name__)
        if written:
            self._history.prune(key)
        self.publications.append(publication)

    def _tables_of(self, publication: Publication, written: bool) -> list[str]:
        """The tables a publication writes to (each must be writable, or none is written)."""
        named = {
            "messages": written,
            "outbox": bool(publication.parts),
            "inbox": publication.item_id is not None,
            "turn_records": publication.record is not None,
            "usage": publication.usage is not None and self._usage is not None,
        }
        return [table for table, writes in named.items() if writes]

    async def delivered(self, part_id: str, platform_id: str) -> None:
        self._settle(part_id, "delivered", platform_id, None)

    async def abandon(self, part_id: str, error: str) -> None:
        self._settle(part_id, "abandoned", None, error)

    async def undelivered(self) -> list[OutboxPart]:
        """This store's unposted parts, oldest first (what others left comes by `adopt`)."""
        self._opened.check_open()
        rows = sorted(self._opened.tables.parts.values(), key=lambda r: r.row_id)
        mine = not self._opened.shared
        return [
            row.part
            for row in rows
            if row.state == "pending" and (mine or row.owner == self._opened.owner)
        ]

    async def parts(self, turn_id: str) -> list[OutboxPart]:
        self._opened.check_open()
        rows = [row for row in self._opened.tables.parts.values() if row.part.turn_id == turn_id]
        return [row.part for row in sorted(rows, key=lambda r: r.part.index)]

    async def opened(self, turn_id: str, index: int, platform_id: str) -> None:
        tables = self._opened.write("streams")
        tables.streams[(turn_id, index)] = (platform_id, tables.clock())

    async def streamed(self, turn_id: str) -> dict[int, str]:
        self._opened.check_open()
        streams = self._opened.tables.streams
        return {index: found for (turn, index), (found, _) in streams.items() if turn == turn_id}

    def _settle(self, part_id: str, state: str, platform_id: str | None, error: str | None) -> None:
        tables = self._opened.write("outbox")
        row = tables.parts.get(part_id)
        if row is None:
            return
        row.state, row.error, row.settled_at = state, error, tables.clock()
        row.part = replace(row.part, platform_id=platform_id)


class MemoryWorkShare(WorkShare):
    """The WorkShare port among replicas sharing the tables (`bot.store.postgres.claims`' rules): a
    conversation is adopted whole by one live replica at a time, in accepted order."""

    def __init__(self, opened: Opened) -> None:
        self._opened = opened

    async def adopt(self, conversation_key: str) -> Adopted:
        tables = self._opened.write("inbox", "outbox")
        me = self._opened.owner
        items = [
            row
            for row in tables.items.values()
            if row.conversation_key == conversation_key and row.state is InboxState.PENDING
        ]
        parts = [
            row
            for row in tables.parts.values()
            if row.part.conversation_key == conversation_key and row.state == "pending"
        ]
        owners = [row.owner for row in items] + [row.owner for row in parts]
        if any(self._opened.live_other(owner) for owner in owners):
            return Adopted()
        taken_parts = sorted((row for row in parts if row.owner != me), key=lambda r: r.row_id)
        taken_items = sorted((row for row in items if row.owner != me), key=lambda r: r.item_id)
        resumed = frozenset(row.item_id for row in taken_items if row.owner)
        for part in taken_parts:
            part.owner = me
        for item in taken_items:
            item.owner = me
        return Adopted(
            tuple(row.part for row in taken_parts),
            tuple(InboxItem(row.item_id, row.request, row.attempts) for row in taken_items),
            resumed,
        )

    async def orphaned(self, limit: int) -> list[str]:
        self._opened.check_open()
        tables = self._opened.tables
        work: dict[str, tuple[int, bool]] = {}  # key -> (oldest id, whether anyone live owns it)
        rows = [
            (row.conversation_key, row.item_id, row.owner)
            for row in tables.items.values()
            if row.state is InboxState.PENDING
        ] + [
            (row.part.conversation_key, row.row_id, row.owner)
            for row in tables.parts.values()
            if row.state == "pending"
        ]
        for key, row_id, owner in rows:
            oldest, owned = work.get(key, (row_id, False))
            work[key] = (min(oldest, row_id), owned or (owner != "" and owner in tables.live))
        free = sorted((oldest, key) for key, (oldest, owned) in work.items() if not owned)
        return [key for _, key in free[:limit]]
