"""The durable inbox, its dedupe marks and the outbox on PostgreSQL (ports: `bot.inbox`), with
the SQLite store's semantics (`bot.store.inbox`).

`accept` is one transaction: INSERT ... ON CONFLICT DO NOTHING of every mark (so deliveries racing
on any number of replicas get exactly one item between them) and the item itself. `publish` is
one transaction too: the turn's history, its answer's parts, its item's terminal state and its
turn record, and only while the item is still this replica's (else `ClaimLost`, nothing written).
An accepted item is nobody's until a replica adopts its conversation (`bot.pgstore.claims`).
Marks, finished items and settled parts are bounded like SQLite's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from bot.errors import ClaimLost
from bot.inbox import InboxItem, InboxState, OutboxPart, Publication
from bot.pgstore.buffer import PgChatBuffer
from bot.pgstore.db import PgDatabase
from bot.pgstore.history import PgHistory
from bot.pgstore.records import PgTurnRecords
from bot.ports.history import Chatter
from bot.store.inbox import (
    DEFAULT_KEEP,
    DEFAULT_MAX_AGE_DAYS,
    SETTLED_MAX_AGE_DAYS,
    PruneSchedule,
)
from bot.store.request_codec import (
    encode_request,
    inbox_items,
    outbox_parts,
    part_row,
)
from bot.turns import TurnRequest

log = structlog.get_logger(__name__)

_DAY = 86_400.0


class PgInbox:
    """The Inbox port: accepted events and their dedupe marks."""

    def __init__(
        self,
        db: PgDatabase,
        clock: Callable[[], float],
        *,
        keep: int = DEFAULT_KEEP,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
        owner: str = "",
        buffer: PgChatBuffer | None = None,
    ):
        """`buffer`: the store's chat buffer, which `note` appends chatter to (a default one on
        the same database when None)."""
        self._db = db
        self._clock = clock
        self._owner = owner  # whose pending items `pending()` lists
        self._keep = keep
        self._max_age = max_age_days * _DAY
        self._prune_schedule = PruneSchedule()
        self._buffer = buffer or PgChatBuffer(db, clock)

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

        async def accept(conn: Any) -> InboxItem | None:
            item = None
            if await self._mark(conn, source, marks):
                item_id = await conn.fetchval(
                    """INSERT INTO inbox (turn_id, conversation_key, source, accepted_at, request)
                       VALUES ($1, $2, $3, $4, $5) RETURNING id""",
                    request.turn_id,
                    request.conversation_key,
                    source,
                    self._clock(),
                    body,
                )
                item = InboxItem(int(item_id), request)
                if consumes is not None:
                    await conn.execute(
                        "DELETE FROM chat_buffer WHERE key = $1 AND id <= $2",
                        request.conversation_key,
                        consumes,
                    )
            if prune:
                await self._prune(conn)
            return item

        return await self._db.write(accept)

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        prune = self._prune_schedule.due()

        async def note(conn: Any) -> bool:
            new = await self._mark(conn, source, marks)
            if new and chatter is not None:
                await self._buffer.append_in(conn, chatter)
            if prune:
                await self._prune(conn)
            return new

        return await self._db.write(note)

    async def claim(self, item_id: int) -> int:
        async def claim(conn: Any) -> int:
            found = await conn.fetchval(
                "UPDATE inbox SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts",
                item_id,
            )
            return int(found or 0)

        return await self._db.write(claim)

    async def pending(self) -> list[InboxItem]:
        """Unfinished items that are this replica's or nobody's yet (with one replica: all of
        them, as on SQLite). What other replicas left comes through `PgWorkShare`."""
        rows = await self._db.fetch_all(
            "SELECT id, attempts, request FROM inbox WHERE state = 'pending' "
            "AND owner IN ('', $1) ORDER BY id",
            (self._owner,),
        )
        return inbox_items(rows)

    async def state(self, item_id: int) -> InboxState | None:
        """The item's state (for tests and inspection); None when there is no such item."""
        found = await self._db.fetch_value("SELECT state FROM inbox WHERE id = $1", (item_id,))
        return InboxState(found) if found else None

    async def prune(self) -> None:
        await self._db.write(self._prune)

    async def _mark(self, conn: Any, source: str, marks: Sequence[str]) -> bool:
        new = True
        for mark in marks:
            status = await conn.execute(
                "INSERT INTO events (source, event_id, seen_at) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING",
                source,
                mark,
                self._clock(),
            )
            new = new and status == "INSERT 0 1"
        return new

    async def _prune(self, conn: Any) -> None:
        now = self._clock()
        await conn.execute("DELETE FROM events WHERE seen_at < $1", now - self._max_age)
        await conn.execute(
            """DELETE FROM events WHERE seen_at < (
                   SELECT seen_at FROM events ORDER BY seen_at DESC LIMIT 1 OFFSET $1)""",
            self._keep - 1,
        )
        settled = now - SETTLED_MAX_AGE_DAYS * _DAY
        await conn.execute(
            "DELETE FROM inbox WHERE state != 'pending' AND finished_at < $1", settled
        )
        await conn.execute(
            "DELETE FROM outbox WHERE state != 'pending' AND settled_at < $1", settled
        )
        # A stream whose turn never published (given up, or its item pruned) is long over.
        await conn.execute("DELETE FROM streams WHERE opened_at < $1", settled)


class PgOutbox:
    """The Outbox port: publications (history, parts, item state, record) and part delivery."""

    def __init__(
        self,
        db: PgDatabase,
        history: PgHistory,
        records: PgTurnRecords,
        clock: Callable[[], float],
        *,
        owner: str = "",
    ):
        self._db = db
        self._history = history
        self._records = records
        self._clock = clock
        self._owner = owner

    async def publish(self, publication: Publication) -> None:
        key = publication.conversation_key
        fresh = self._history.stage(publication.entries)
        record = publication.record
        document = self._records.stage(record) if record is not None else None
        parts = [part_row(p) for p in publication.parts]
        turns = sorted({p.turn_id for p in publication.parts})

        async def publish(conn: Any) -> None:
            if fresh or publication.replace:
                await self._history.write_staged(conn, key, fresh, publication.replace)
            now = self._clock()
            await conn.executemany(
                """INSERT INTO outbox (part_id, turn_id, conversation_key, idx, route, text,
                       platform_id, created_at, owner)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
                [(*part, now, self._owner) for part in parts],
            )
            # The parts took the ids of the messages the turn's streams opened.
            if turns:
                await conn.execute("DELETE FROM streams WHERE turn_id = ANY($1::text[])", turns)
            if publication.item_id is not None and publication.state is not None:
                # Still ours (or never adopted, as in store-level use): else roll it all back.
                found = await conn.fetchval(
                    """UPDATE inbox SET state = $1, finished_at = $2
                       WHERE id = $3 AND owner IN ('', $4) RETURNING id""",
                    publication.state.value,
                    now,
                    publication.item_id,
                    self._owner,
                )
                if found is None:
                    raise ClaimLost(f"inbox item {publication.item_id} is another replica's now")
            if record is not None and document is not None:
                await self._records.write_staged(conn, record, document)

        await self._db.write(publish)
        if fresh or publication.replace:
            await self._history.prune_after(key)

    async def delivered(self, part_id: str, platform_id: str) -> None:
        await self._settle(part_id, "delivered", platform_id, None)

    async def abandon(self, part_id: str, error: str) -> None:
        await self._settle(part_id, "abandoned", None, error)

    async def undelivered(self) -> list[OutboxPart]:
        """This replica's unposted parts (what others left comes through `PgWorkShare`)."""
        return await self._parts(
            "WHERE state = 'pending' AND owner = $1 ORDER BY id", (self._owner,)
        )

    async def parts(self, turn_id: str) -> list[OutboxPart]:
        return await self._parts("WHERE turn_id = $1 ORDER BY idx", (turn_id,))

    async def opened(self, turn_id: str, index: int, platform_id: str) -> None:
        async def opened(conn: Any) -> None:
            await conn.execute(
                """INSERT INTO streams (turn_id, idx, platform_id, opened_at)
                   VALUES ($1, $2, $3, $4)
                   ON CONFLICT (turn_id, idx) DO UPDATE SET platform_id = EXCLUDED.platform_id""",
                turn_id,
                index,
                platform_id,
                self._clock(),
            )

        await self._db.write(opened)

    async def streamed(self, turn_id: str) -> dict[int, str]:
        rows = await self._db.fetch_all(
            "SELECT idx, platform_id FROM streams WHERE turn_id = $1", (turn_id,)
        )
        return {int(row["idx"]): str(row["platform_id"]) for row in rows}

    async def _parts(self, where: str, params: tuple[str, ...]) -> list[OutboxPart]:
        rows = await self._db.fetch_all(
            "SELECT part_id, turn_id, conversation_key, idx, route, text, platform_id "
            f"FROM outbox {where}",
            params,
        )
        return outbox_parts(rows)

    async def _settle(
        self, part_id: str, state: str, platform_id: str | None, error: str | None
    ) -> None:
        async def settle(conn: Any) -> None:
            await conn.execute(
                """UPDATE outbox SET state = $1, platform_id = $2, error = $3, settled_at = $4
                   WHERE part_id = $5""",
                state,
                platform_id,
                error,
                self._clock(),
                part_id,
            )

        await self._db.write(settle)
