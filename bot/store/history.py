"""Conversation history (SPEC §5): per-key message windows, published atomically, pruned by bounds.

A publish is one transaction: it appends the turn's entries (or replaces the whole history), trims
the conversation to its newest `history_messages` entries so that the window never opens on a tool
result or an assistant message, and records the conversation's size and activity. Only after it
commits does a second transaction prune other conversations by the aggregate bounds (idle days,
conversation count, total bytes), oldest-inactive first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiosqlite
import structlog

from bot.config import StoreSettings
from bot.errors import UnreadableRecord
from bot.store.codec import bound_entry, decode_entry, encode_entry
from bot.store.db import Database
from bot.turns import HistoryEntry, ToolResultBlock

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_PRUNE_BATCH = 256


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    key: str
    last_active: float  # unix seconds
    messages: int
    bytes: int


@dataclass(frozen=True, slots=True)
class _Stored:
    seq: int | None  # None until written
    entry: HistoryEntry
    body: str


class SqliteHistory:
    """The HistoryStore port on the shared database."""

    def __init__(self, db: Database, settings: StoreSettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock

    async def load(self, key: str) -> list[HistoryEntry]:
        rows = await self._db.fetch_all(
            "SELECT seq, body FROM messages WHERE key = ? ORDER BY seq", (key,)
        )
        try:
            return [decode_entry(row["body"]) for row in rows]
        except UnreadableRecord as exc:
            # Start cold rather than crash or replay a damaged history; the next publish
            # replaces it (see _publish).
            log.warning("history_unreadable", conversation_key=key, reason=str(exc))
            return []

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        fresh = self.stage(entries)

        async def publish(conn: aiosqlite.Connection) -> None:
            await self.write_staged(conn, key, fresh, replace)

        await self._db.write(publish)
        await self.prune_after(key)

    def stage(self, entries: Sequence[HistoryEntry]) -> list[_Stored]:
        """Bound and encode entries outside the write lock (see `write_staged`)."""
        limit = self._settings.message_max_bytes
        return [_Stored(None, e, encode_entry(e)) for e in (bound_entry(e, limit) for e in entries)]

    async def prune_after(self, key: str) -> None:
        """The aggregate bounds, in a transaction of their own after a publish committed."""
        try:
            await self._db.write(lambda conn: self._prune(conn, key))
        except Exception as exc:  # the publish stands; pruning runs again after the next one
            log.warning("history_prune_failed", error=type(exc).__name__, detail=str(exc))

    async def reset(self, key: str) -> bool:
        async def reset(conn: aiosqlite.Connection) -> bool:
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

    async def write_staged(
        self, conn: aiosqlite.Connection, key: str, fresh: list[_Stored], replace: bool
    ) -> None:
        """Append (or replace with) staged entries inside the caller's write transaction."""
        existing = [] if replace else await _read_window(conn, key)
        window = _trim(existing + fresh, self._settings.history_messages)
        kept_seqs = [item.seq for item in window if item.seq is not None]
        if kept_seqs:
            await conn.execute(
                "DELETE FROM messages WHERE key = ? AND seq < ?", (key, kept_seqs[0])
            )
        else:
            await conn.execute("DELETE FROM messages WHERE key = ?", (key,))
        next_seq = await _next_seq(conn, key)
        new_rows = [item for item in window if item.seq is None]
        await conn.executemany(
            "INSERT INTO messages (key, seq, body) VALUES (?, ?, ?)",
            [(key, next_seq + i, item.body) for i, item in enumerate(new_rows)],
        )
        size = sum(len(item.body.encode("utf-8")) for item in window)
        await conn.execute(
            """INSERT INTO conversations (key, last_active, bytes, next_seq) VALUES (?, ?, ?, ?)
               ON CONFLICT (key) DO UPDATE SET last_active = excluded.last_active,
                   bytes = excluded.bytes, next_seq = excluded.next_seq""",
            (key, self._clock(), size, next_seq + len(new_rows)),
        )

    async def _prune(self, conn: aiosqlite.Connection, keep: str) -> None:
        settings = self._settings
        idle_cutoff = self._clock() - settings.idle_days * _DAY
        idle = await _oldest(conn, keep, "last_active < ?", (idle_cutoff,))
        removed = {"idle": await _delete_all(conn, idle)}
        count, total_bytes = await _totals(conn)
        if count > settings.max_conversations:
            surplus = await _oldest(conn, keep, "1", (), limit=count - settings.max_conversations)
            removed["count"] = await _delete_all(conn, surplus)
        removed["bytes"] = await self._prune_bytes(conn, keep, total_bytes)
        if any(removed.values()):
            log.info("history_pruned", **removed)

    async def _prune_bytes(self, conn: aiosqlite.Connection, keep: str, total: int) -> int:
        removed = 0
        while total > self._settings.max_bytes:
            rows = await _oldest_with_size(conn, keep)
            if not rows:
                break  # only the conversation just published is left; it is never pruned
            for row_key, row_bytes in rows:
                if total <= self._settings.max_bytes:
                    break
                await _delete_conversation(conn, row_key)
                total -= row_bytes
                removed += 1
            total = (await _totals(conn))[1]
        return removed


def _trim(items: list[_Stored], limit: int) -> list[_Stored]:
    """At most `limit` items, opened on a clean start (see `_opens_window`).

    Over the limit, the window drops to its newest half at once instead of shedding one turn's
    worth per turn: replayed history then keeps the same first message for many turns, so the
    provider's prompt cache keeps matching it. Sliding by two messages a turn would change the
    start of the history, and miss the cache, on every single turn of a long conversation.
    """
    if len(items) > limit:
        items = items[-max(limit // 2, 2) :]
    start = 0
    while start < len(items) and not _opens_window(items[start].entry):
        start += 1
    return items[start:]


def _opens_window(entry: HistoryEntry) -> bool:
    """Replayed history must start on a person's message (or a compaction summary), never on a
    tool result whose call was cut away, nor on an assistant message."""
    if entry.summary:
        return True
    return entry.role == "user" and not any(isinstance(b, ToolResultBlock) for b in entry.blocks)


async def _read_window(conn: aiosqlite.Connection, key: str) -> list[_Stored]:
    async with conn.execute(
        "SELECT seq, body FROM messages WHERE key = ? ORDER BY seq", (key,)
    ) as cursor:
        rows = list(await cursor.fetchall())
    try:
        return [_Stored(row["seq"], decode_entry(row["body"]), row["body"]) for row in rows]
    except UnreadableRecord as exc:
        log.warning("history_unreadable_replaced", conversation_key=key, reason=str(exc))
        return []


async def _next_seq(conn: aiosqlite.Connection, key: str) -> int:
    async with conn.execute("SELECT next_seq FROM conversations WHERE key = ?", (key,)) as cursor:
        row = await cursor.fetchone()
    return int(row["next_seq"]) if row else 0


async def _totals(conn: aiosqlite.Connection) -> tuple[int, int]:
    async with conn.execute("SELECT name, value FROM totals") as cursor:
        values = {row["name"]: int(row["value"]) for row in await cursor.fetchall()}
    return values.get("conversations", 0), values.get("history_bytes", 0)


async def _oldest(
    conn: aiosqlite.Connection,
    keep: str,
    condition: str,
    params: tuple[float, ...],
    *,
    limit: int = _PRUNE_BATCH,
) -> list[str]:
    async with conn.execute(
        f"SELECT key FROM conversations WHERE {condition} AND key != ? "
        "ORDER BY last_active LIMIT ?",
        (*params, keep, limit),
    ) as cursor:
        return [row["key"] for row in await cursor.fetchall()]


async def _oldest_with_size(conn: aiosqlite.Connection, keep: str) -> list[tuple[str, int]]:
    async with conn.execute(
        "SELECT key, bytes FROM conversations WHERE key != ? ORDER BY last_active LIMIT ?",
        (keep, _PRUNE_BATCH),
    ) as cursor:
        return [(row["key"], int(row["bytes"])) for row in await cursor.fetchall()]


async def _delete_all(conn: aiosqlite.Connection, keys: list[str]) -> int:
    for key in keys:
        await _delete_conversation(conn, key)
    return len(keys)


async def _delete_conversation(conn: aiosqlite.Connection, key: str) -> bool:
    await conn.execute("DELETE FROM messages WHERE key = ?", (key,))
    async with conn.execute("DELETE FROM conversations WHERE key = ?", (key,)) as cursor:
        return cursor.rowcount > 0
