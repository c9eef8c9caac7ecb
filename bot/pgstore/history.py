"""Conversation history on PostgreSQL (SPEC §5): the same windows and bounds as the SQLite store.

A publish is one transaction holding the conversation's advisory lock, so two replicas never
interleave their publishes of one conversation; the window is trimmed by the SQLite store's own
rule (`bot.store.history`). Pruning runs after the publish commits, in its own transaction, and
skips any conversation whose lock another replica holds (it is being published right now).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from bot.config import StoreSettings
from bot.errors import UnreadableRecord
from bot.pgstore.db import PgDatabase
from bot.store.codec import bound_entry, decode_entry, encode_entry
from bot.store.history import ConversationInfo, _Stored, _trim
from bot.turns import HistoryEntry

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_PRUNE_BATCH = 256
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('history:' || $1, 0))"
_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(hashtextextended('history:' || $1, 0))"


class PgHistory:
    """The HistoryStore port on PostgreSQL."""

    def __init__(self, db: PgDatabase, settings: StoreSettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock

    async def load(self, key: str) -> list[HistoryEntry]:
        rows = await self._db.fetch_all(
            "SELECT body FROM messages WHERE key = $1 ORDER BY seq", (key,)
        )
        try:
            return [decode_entry(row["body"]) for row in rows]
        except UnreadableRecord as exc:
            log.warning("history_unreadable", conversation_key=key, reason=str(exc))
            return []

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        fresh = self.stage(entries)

        async def publish(conn: Any) -> None:
            await self.write_staged(conn, key, fresh, replace)

        await self._db.write(publish)
        await self.prune_after(key)

    def stage(self, entries: Sequence[HistoryEntry]) -> list[_Stored]:
        """Bound and encode entries before the transaction (see `write_staged`)."""
        limit = self._settings.message_max_bytes
        return [_Stored(None, e, encode_entry(e)) for e in (bound_entry(e, limit) for e in entries)]

    async def prune_after(self, key: str) -> None:
        """The aggregate bounds, in a transaction of their own after a publish committed."""
        try:
            await self._db.write(lambda conn: self._prune(conn, key))
        except Exception as exc:  # the publish stands; pruning runs again after the next one
            log.warning("history_prune_failed", error=type(exc).__name__, detail=str(exc))

    async def reset(self, key: str) -> bool:
        async def reset(conn: Any) -> bool:
            await conn.execute(_LOCK, key)
            return await _delete_conversation(conn, key)

        return await self._db.write(reset)

    async def conversations(self) -> list[str]:
        rows = await self._db.fetch_all("SELECT key FROM conversations ORDER BY last_active DESC")
        return [row["key"] for row in rows]

    async def describe(self) -> list[ConversationInfo]:
        """Every conversation with its size and activity, most recently active first."""
        rows = await self._db.fetch_all(
            """SELECT c.key, c.last_active, c.bytes,
                      (SELECT count(*) FROM messages m WHERE m.key = c.key) AS messages
               FROM conversations c ORDER BY c.last_active DESC"""
        )
        return [
            ConversationInfo(row["key"], row["last_active"], row["messages"], row["bytes"])
            for row in rows
        ]

    # --- inside the write transaction -----------------------------------------------------------

    async def write_staged(self, conn: Any, key: str, fresh: list[_Stored], replace: bool) -> None:
        """Append (or replace with) staged entries inside the caller's transaction."""
        await conn.execute(_LOCK, key)
        existing = [] if replace else await _read_window(conn, key)
        window = _trim(existing + fresh, self._settings.history_messages)
        kept_seqs = [item.seq for item in window if item.seq is not None]
        if kept_seqs:
            await conn.execute(
                "DELETE FROM messages WHERE key = $1 AND seq < $2", key, kept_seqs[0]
            )
        else:
            await conn.execute("DELETE FROM messages WHERE key = $1", key)
        next_seq = await conn.fetchval("SELECT next_seq FROM conversations WHERE key = $1", key)
        next_seq = int(next_seq or 0)
        new_rows = [item for item in window if item.seq is None]
        await conn.executemany(
            "INSERT INTO messages (key, seq, body) VALUES ($1, $2, $3)",
            [(key, next_seq + i, item.body) for i, item in enumerate(new_rows)],
        )
        size = sum(len(item.body.encode("utf-8")) for item in window)
        await conn.execute(
            """INSERT INTO conversations (key, last_active, bytes, next_seq) VALUES ($1, $2, $3, $4)
               ON CONFLICT (key) DO UPDATE SET last_active = excluded.last_active,
                   bytes = excluded.bytes, next_seq = excluded.next_seq""",
            key,
            self._clock(),
            size,
            next_seq + len(new_rows),
        )

    async def _prune(self, conn: Any, keep: str) -> None:
        settings = self._settings
        idle_cutoff = self._clock() - settings.idle_days * _DAY
        idle = await conn.fetch(
            "SELECT key FROM conversations WHERE last_active < $1 AND key != $2 "
            "ORDER BY last_active LIMIT $3",
            idle_cutoff,
            keep,
            _PRUNE_BATCH,
        )
        removed = {"idle": await _delete_all(conn, [row["key"] for row in idle])}
        count, total = await _totals(conn)
        if count > settings.max_conversations:
            surplus = await _oldest(conn, keep, count - settings.max_conversations)
            removed["count"] = await _delete_all(conn, [key for key, _ in surplus])
            count, total = await _totals(conn)
        removed["bytes"] = await _prune_bytes(conn, keep, total, settings.max_bytes)
        if any(removed.values()):
            log.info("history_pruned", **removed)


async def _prune_bytes(conn: Any, keep: str, total: int, max_bytes: int) -> int:
    """Delete oldest-inactive conversations until the total fits; how many went."""
    removed = 0
    while total > max_bytes:
        batch = await _oldest(conn, keep, _PRUNE_BATCH)
        gone = 0
        for key, size in batch:
            if total <= max_bytes:
                break
            if await _delete_all(conn, [key]):
                gone += 1
                total -= size
        removed += gone
        if not gone:
            break  # only the conversation just published (or ones being published) is left
        total = (await _totals(conn))[1]
    return removed


async def _read_window(conn: Any, key: str) -> list[_Stored]:
    rows = await conn.fetch("SELECT seq, body FROM messages WHERE key = $1 ORDER BY seq", key)
    try:
        return [_Stored(row["seq"], decode_entry(row["body"]), row["body"]) for row in rows]
    except UnreadableRecord as exc:
        log.warning("history_unreadable_replaced", conversation_key=key, reason=str(exc))
        return []


async def _totals(conn: Any) -> tuple[int, int]:
    row = await conn.fetchrow("SELECT count(*), coalesce(sum(bytes), 0) FROM conversations")
    return int(row[0]), int(row[1])


async def _oldest(conn: Any, keep: str, limit: int) -> list[tuple[str, int]]:
    rows = await conn.fetch(
        "SELECT key, bytes FROM conversations WHERE key != $1 ORDER BY last_active LIMIT $2",
        keep,
        limit,
    )
    return [(row["key"], int(row["bytes"])) for row in rows]


async def _delete_all(conn: Any, keys: list[str]) -> int:
    """Delete the conversations no other replica is publishing right now; how many went."""
    removed = 0
    for key in keys:
        if await conn.fetchval(_TRY_LOCK, key) and await _delete_conversation(conn, key):
            removed += 1
    return removed


async def _delete_conversation(conn: Any, key: str) -> bool:
    await conn.execute("DELETE FROM messages WHERE key = $1", key)
    status = await conn.execute("DELETE FROM conversations WHERE key = $1", key)
    return bool(status != "DELETE 0")
