"""The durable inbox, its dedupe marks and the outbox (ports: `bot.ports.intake`,
`bot.ports.outbox`).

`accept` is one transaction: each mark inserted unless already there (so two deliveries racing,
in this process or another, get exactly one item between them) and the item itself. `publish` is
one transaction too: the turn's history, its answer's parts, its item's terminal state, its turn
record, its usage charge and its memory capture, then the history bounds (capture and pruning in
savepoints, so neither can fail the publication). Marks, finished items and settled parts are
bounded by age and by count; pruning runs every `PRUNE_EVERY` accepted events so the common path
stays a few statements.

Whose work an item or part is, is the store's `Owners`: on SQLite one process owns it all (the
default here: nothing recorded or checked); PostgreSQL's replicas name themselves on their work
(`bot.store.postgres.owners.Replica`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from bot.ports.history import Chatter
from bot.ports.intake import InboxItem
from bot.ports.memory import MemoryCapture
from bot.ports.outbox import InboxState, OutboxPart, Publication
from bot.ports.sql import Sql, SqlDatabase
from bot.store.sql.buffer import SqlChatBuffer
from bot.store.sql.conn import PruneSchedule, attempt
from bot.store.sql.history import SqlHistory
from bot.store.sql.memory import SqlMemory
from bot.store.sql.records import SqlTurnRecords
from bot.store.sql.request_codec import PartRow, encode_request, inbox_items, outbox_parts, part_row
from bot.store.sql.usage import SqlUsageLedger
from bot.turns import TurnRequest

log = structlog.get_logger(__name__)

DEFAULT_KEEP = 100_000  # dedupe marks
DEFAULT_MAX_AGE_DAYS = 7.0  # dedupe marks: far longer than any platform redelivers
SETTLED_MAX_AGE_DAYS = 1.0  # finished items and settled parts, kept for inspection
PRUNE_EVERY = 1_000

_DAY = 86_400.0


class Owners:
    """Whose work the inbox's items and the outbox's parts are. This default is for a store that
    one process owns all of: its tables name no owner, and everything pending is its own."""

    def items(self) -> tuple[str, tuple[str, ...]]:
        """A condition on inbox rows: the pending items this process runs."""
        return "TRUE", ()

    def parts(self) -> tuple[str, tuple[str, ...]]:
        """A condition on outbox rows: the undelivered parts this process posts."""
        return "TRUE", ()

    async def add_parts(self, tx: Sql, parts: list[PartRow], now: float) -> None:
        """Insert a publication's parts, as this process's to post."""
        await tx.execute_many(
            """INSERT INTO outbox (part_id, turn_id, conversation_key, idx, route, text,
                   platform_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
            [(*part, now) for part in parts],
        )

    async def finish(
        self,
        tx: Sql,
        item_id: int,
        state: InboxState,
        now: float,
        consumed_by: str | None = None,
    ) -> None:
        """Mark an item finished (it is this process's, so no check); `consumed_by`: the turn
        that took it in beside its own."""
        await tx.execute(
            "UPDATE inbox SET state = ?, finished_at = ?, consumed_by = ? WHERE id = ?",
            state.value,
            now,
            consumed_by,
            item_id,
        )


class SqlInbox:
    """The Inbox port: accepted events and their dedupe marks."""

    def __init__(
        self,
        db: SqlDatabase,
        clock: Callable[[], float],
        *,
        keep: int = DEFAULT_KEEP,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
        buffer: SqlChatBuffer | None = None,
        owners: Owners | None = None,
    ):
        """`buffer`: the store's chat buffer, which `note` appends chatter to (a default one on
        the same database when None)."""
        self._db = db
        self._clock = clock
        self._keep = keep
        self._max_age = max_age_days * _DAY
        self._prune_schedule = PruneSchedule(PRUNE_EVERY)
        self._buffer = buffer or SqlChatBuffer(db, clock)
        self._owners = owners or Owners()

    async def accept(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> InboxItem | None:
        body = encode_request(request)
        prune = self._prune_schedule.due()

        async def accept(tx: Sql) -> InboxItem | None:
            item = None
            if await self._mark(tx, source, marks):
                item_id = await tx.fetch_value(
                    """INSERT INTO inbox (turn_id, conversation_key, source, accepted_at, request)
                       VALUES (?, ?, ?, ?, ?) RETURNING id""",
                    request.turn_id,
                    request.conversation_key,
                    source,
                    self._clock(),
                    body,
                )
                item = InboxItem(int(item_id), request)
                if consumes is not None:
                    await tx.execute(
                        "DELETE FROM chat_buffer WHERE key = ? AND id <= ?",
                        request.conversation_key,
                        consumes,
                    )
            if prune:
                await self._prune(tx)
            return item

        return await self._db.transaction(accept)

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        prune = self._prune_schedule.due()

        async def note(tx: Sql) -> bool:
            new = await self._mark(tx, source, marks)
            if new and chatter is not None:
                await self._buffer.append_in(tx, chatter)
            if prune:
                await self._prune(tx)
            return new

        return await self._db.transaction(note)

    async def claim(self, item_id: int) -> int:
        async def claim(tx: Sql) -> int:
            found = await tx.fetch_value(
                "UPDATE inbox SET attempts = attempts + 1 WHERE id = ? RETURNING attempts", item_id
            )
            return int(found or 0)

        return await self._db.transaction(claim)

    async def pending(self) -> list[InboxItem]:
        """Unfinished items that are this process's to run (with one process: all of them;
        what other replicas left comes through `WorkShare`)."""
        mine, params = self._owners.items()
        rows = await self._db.reads().fetch_all(
            "SELECT id, attempts, request FROM inbox "
            f"WHERE state = 'pending' AND {mine} ORDER BY id",
            *params,
        )
        return inbox_items(rows)

    async def consumed_by(self, item_id: int) -> str | None:
        """The turn that took the item in beside its own (for tests and inspection)."""
        found = await self._db.reads().fetch_value(
            "SELECT consumed_by FROM inbox WHERE id = ?", item_id
        )
        return str(found) if found is not None else None

    async def state(self, item_id: int) -> InboxState | None:
        """The item's state (for tests and inspection); None when there is no such item."""
        found = await self._db.reads().fetch_value("SELECT state FROM inbox WHERE id = ?", item_id)
        return InboxState(found) if found else None

    async def prune(self) -> None:
        await self._db.transaction(self._prune)

    async def _mark(self, tx: Sql, source: str, marks: Sequence[str]) -> bool:
        new = True
        for mark in marks:
            added = await tx.execute(
                "INSERT INTO events (source, event_id, seen_at) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                source,
                mark,
                self._clock(),
            )
            new = new and added == 1
        return new

    async def _prune(self, tx: Sql) -> None:
        now = self._clock()
        await tx.execute("DELETE FROM events WHERE seen_at < ?", now - self._max_age)
        # The newest `keep` by time survive; OFFSET finds the oldest of them via the age index.
        await tx.execute(
            """DELETE FROM events WHERE seen_at < (
                   SELECT seen_at FROM events ORDER BY seen_at DESC LIMIT 1 OFFSET ?)""",
            self._keep - 1,
        )
        settled = now - SETTLED_MAX_AGE_DAYS * _DAY
        await tx.execute("DELETE FROM inbox WHERE state != 'pending' AND finished_at < ?", settled)
        await tx.execute("DELETE FROM outbox WHERE state != 'pending' AND settled_at < ?", settled)
        # A stream whose turn never published (given up, or its item pruned) is long over.
        await tx.execute("DELETE FROM streams WHERE opened_at < ?", settled)


class SqlOutbox:
    """The Outbox port: publications (history, parts, item state, record) and part delivery."""

    def __init__(
        self,
        db: SqlDatabase,
        history: SqlHistory,
        records: SqlTurnRecords,
        clock: Callable[[], float],
        *,
        owners: Owners | None = None,
        usage: SqlUsageLedger | None = None,
        memory: SqlMemory | None = None,
    ):
        """`usage` and `memory`: where a publication's charge and capture go (left out when
        None)."""
        self._db = db
        self._history = history
        self._records = records
        self._clock = clock
        self._owners = owners or Owners()
        self._usage = usage
        self._memory = memory

    async def publish(self, publication: Publication) -> None:
        key = publication.conversation_key
        fresh = self._history.stage(publication.entries)
        record = publication.record
        document = self._records.stage(record) if record is not None else None
        parts = [part_row(p) for p in publication.parts]
        turns = sorted({p.turn_id for p in publication.parts})

        async def publish(tx: Sql) -> None:
            written = fresh or publication.replace
            if written:
                await self._history.write_staged(tx, key, fresh, publication.replace)
            now = self._clock()
            await self._owners.add_parts(tx, parts, now)
            # The parts took the ids of the messages the turn's streams opened.
            await tx.execute_many("DELETE FROM streams WHERE turn_id = ?", [(t,) for t in turns])
            if publication.item_id is not None and publication.state is not None:
                await self._owners.finish(tx, publication.item_id, publication.state, now)
            by = record.turn_id if record is not None else None
            for item_id in publication.consumed:
                await self._owners.finish(tx, item_id, InboxState.CONSUMED, now, consumed_by=by)
            if record is not None and document is not None:
                await self._records.write_staged(tx, record, document)
            if publication.usage is not None and self._usage is not None:
                await self._usage.add_in(tx, publication.usage)
            await self._after(tx, publication.capture, key if written else None)

        await self._db.transaction(publish)

    async def _after(self, tx: Sql, capture: MemoryCapture | None, pruned: str | None) -> None:
        """What follows a publication in its transaction but must never fail it: the memory
        capture, and the store's bounds (pruning runs again after the next publish)."""
        memory = self._memory
        if capture is not None and memory is not None:
            error = await attempt(tx, "capture", lambda t: memory.capture_in(t, capture))
            if error is not None:
                log.warning("memory_capture_failed", error=type(error).__name__)
        if pruned is not None:
            key = pruned
            error = await attempt(tx, "prune", lambda t: self._history.prune_in(t, key))
            if error is not None:
                log.warning("history_prune_failed", error=type(error).__name__, detail=str(error))

    async def delivered(self, part_id: str, platform_id: str) -> None:
        await self._settle(part_id, "delivered", platform_id, None)

    async def abandon(self, part_id: str, error: str) -> None:
        await self._settle(part_id, "abandoned", None, error)

    async def undelivered(self) -> list[OutboxPart]:
        """This process's unposted parts (what other replicas left comes through `WorkShare`)."""
        mine, params = self._owners.parts()
        return await self._parts(f"WHERE state = 'pending' AND {mine} ORDER BY id", *params)

    async def opened(self, turn_id: str, index: int, platform_id: str) -> None:
        async def opened(tx: Sql) -> None:
            await tx.execute(
                """INSERT INTO streams (turn_id, idx, platform_id, opened_at) VALUES (?, ?, ?, ?)
                   ON CONFLICT (turn_id, idx) DO UPDATE SET platform_id = excluded.platform_id,
                       opened_at = excluded.opened_at""",
                turn_id,
                index,
                platform_id,
                self._clock(),
            )

        # Urgent, as a delivered mark is: until this commits, a crash shows the answer twice.
        await self._db.transaction(opened, urgent=True)

    async def streamed(self, turn_id: str) -> dict[int, str]:
        rows = await self._db.reads().fetch_all(
            "SELECT idx, platform_id FROM streams WHERE turn_id = ?", turn_id
        )
        return {int(row["idx"]): str(row["platform_id"]) for row in rows}

    async def parts(self, turn_id: str) -> list[OutboxPart]:
        return await self._parts("WHERE turn_id = ? ORDER BY idx", turn_id)

    async def _parts(self, where: str, *params: str) -> list[OutboxPart]:
        rows = await self._db.reads().fetch_all(
            "SELECT part_id, turn_id, conversation_key, idx, route, text, platform_id "
            f"FROM outbox {where}",
            *params,
        )
        return outbox_parts(rows)

    async def _settle(
        self, part_id: str, state: str, platform_id: str | None, error: str | None
    ) -> None:
        async def settle(tx: Sql) -> None:
            await tx.execute(
                """UPDATE outbox SET state = ?, platform_id = ?, error = ?, settled_at = ?
                   WHERE part_id = ?""",
                state,
                platform_id,
                error,
                self._clock(),
                part_id,
            )

        # Urgent: until the mark is durable a crash posts the part again (Telegram has no
        # idempotency key), so it never waits behind the group commit of other turns' writes.
        await self._db.transaction(settle, urgent=True)
