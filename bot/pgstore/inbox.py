"""The inbox and outbox on PostgreSQL (`bot.sql.inbox`), where replicas share the work: items and
parts name the replica that runs them (`bot.pgstore.claims`).

An accepted item is nobody's until a replica adopts its conversation. A replica lists as pending
only the items that are its own or nobody's, and as undelivered only its own parts; parts it
publishes are its own. Publishing an item's end happens only while the item is still this
replica's (else `ClaimLost`, and nothing of the publication is written).
"""

from __future__ import annotations

from collections.abc import Callable

from bot.errors import ClaimLost
from bot.inbox import InboxItem, InboxState, OutboxPart
from bot.sql.buffer import ChatBuffer
from bot.sql.conn import Sql, SqlDatabase
from bot.sql.history import History
from bot.sql.inbox import DEFAULT_KEEP, DEFAULT_MAX_AGE_DAYS, Inbox, Outbox
from bot.sql.records import TurnRecords
from bot.sql.request_codec import PartRow, inbox_items


class PgInbox(Inbox):
    """The Inbox port for one replica among several."""

    def __init__(
        self,
        db: SqlDatabase,
        clock: Callable[[], float],
        *,
        keep: int = DEFAULT_KEEP,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
        owner: str = "",
        buffer: ChatBuffer | None = None,
    ):
        super().__init__(db, clock, keep=keep, max_age_days=max_age_days, buffer=buffer)
        self._owner = owner  # whose pending items `pending()` lists

    async def pending(self) -> list[InboxItem]:
        """Unfinished items that are this replica's or nobody's yet (with one replica: all of
        them, as on SQLite). What other replicas left comes through `PgWorkShare`."""
        rows = await self._db.reads().fetch_all(
            "SELECT id, attempts, request FROM inbox WHERE state = 'pending' "
            "AND owner IN ('', ?) ORDER BY id",
            self._owner,
        )
        return inbox_items(rows)


class PgOutbox(Outbox):
    """The Outbox port for one replica among several."""

    def __init__(
        self,
        db: SqlDatabase,
        history: History,
        records: TurnRecords,
        clock: Callable[[], float],
        *,
        owner: str = "",
    ):
        super().__init__(db, history, records, clock)
        self._owner = owner

    async def undelivered(self) -> list[OutboxPart]:
        """This replica's unposted parts (what others left comes through `PgWorkShare`)."""
        return await self._parts("WHERE state = 'pending' AND owner = ? ORDER BY id", self._owner)

    async def _add_parts(self, tx: Sql, parts: list[PartRow], now: float) -> None:
        await tx.execute_many(
            """INSERT INTO outbox (part_id, turn_id, conversation_key, idx, route, text,
                   platform_id, created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [(*part, now, self._owner) for part in parts],
        )

    async def _finish(self, tx: Sql, item_id: int, state: InboxState, now: float) -> None:
        # Still ours (or never adopted, as in store-level use): else roll it all back.
        found = await tx.fetch_value(
            """UPDATE inbox SET state = ?, finished_at = ?
               WHERE id = ? AND owner IN ('', ?) RETURNING id""",
            state.value,
            now,
            item_id,
            self._owner,
        )
        if found is None:
            raise ClaimLost(f"inbox item {item_id} is another replica's now")
