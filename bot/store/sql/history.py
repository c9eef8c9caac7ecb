"""Conversation history (SPEC §5): per-key message windows, published atomically, pruned by bounds.

A publish is one transaction: it appends the turn's entries (or replaces the whole history), trims
the conversation to its newest `history_messages` entries so that the window never opens on a tool
result or an assistant message, and records the conversation's size and activity. Only after it
commits does a second transaction prune other conversations by the aggregate bounds (idle days,
conversation count, total bytes), oldest-inactive first.

A publish holds its conversation's lock (`Sql.lock`), so replicas sharing a database never
interleave their publishes of one conversation, and pruning skips a conversation whose lock
another replica holds (it is being published right now).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from bot.config import StoreSettings
from bot.errors import UnreadableRecord
from bot.ports.history import ConversationInfo
from bot.ports.sql import Sql, SqlDatabase
from bot.prompt.ageing import aged
from bot.store.sql.codec import bound_entry, decode_entry, encode_entry
from bot.turns import HistoryEntry, ToolResultBlock

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_PRUNE_BATCH = 256


@dataclass(frozen=True, slots=True)
class Staged:
    """An entry bounded and encoded for the messages table (`History.stage`)."""

    seq: int | None  # None until written
    entry: HistoryEntry
    body: str


class SqlHistory:
    """The HistoryStore port, plus `describe` for `bot history`."""

    def __init__(self, db: SqlDatabase, settings: StoreSettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock

    async def load(self, key: str) -> list[HistoryEntry]:
        rows = await self._db.reads().fetch_all(
            "SELECT body FROM messages WHERE key = ? ORDER BY seq", key
        )
        try:
            return [decode_entry(row["body"]) for row in rows]
        except UnreadableRecord as exc:
            # Start cold rather than crash or replay a damaged history; the next publish
            # replaces it (see _read_window).
            log.warning("history_unreadable", conversation_key=key, reason=str(exc))
            return []

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        fresh = self.stage(entries)

        async def publish(tx: Sql) -> None:
            await self.write_staged(tx, key, fresh, replace)

        await self._db.transaction(publish)
        await self.prune_after(key)

    def stage(self, entries: Sequence[HistoryEntry]) -> list[Staged]:
        """Bound and encode entries before the write transaction (see `write_staged`)."""
        limit = self._settings.message_max_bytes
        return [Staged(None, e, encode_entry(e)) for e in (bound_entry(e, limit) for e in entries)]

    async def prune_after(self, key: str) -> None:
        """The aggregate bounds, in a transaction of their own after a publish committed."""
        try:
            await self._db.transaction(lambda tx: self.prune_in(tx, key))
        except Exception as exc:  # the publish stands; pruning runs again after the next one
            log.warning("history_prune_failed", error=type(exc).__name__, detail=str(exc))

    async def reset(self, key: str) -> bool:
        async def reset(tx: Sql) -> bool:
            await tx.lock(_lock(key))
            return await _delete_conversation(tx, key)

        return await self._db.transaction(reset)

    async def conversations(self) -> list[str]:
        rows = await self._db.reads().fetch_all(
            "SELECT key FROM conversations ORDER BY last_active DESC"
        )
        return [row["key"] for row in rows]

    async def describe(self) -> list[ConversationInfo]:
        """Every conversation with its size and activity, most recently active first."""
        rows = await self._db.reads().fetch_all(
            """SELECT c.key, c.last_active, c.bytes,
                      (SELECT count(*) FROM messages m WHERE m.key = c.key) AS messages
               FROM conversations c ORDER BY c.last_active DESC"""
        )
        return [
            ConversationInfo(row["key"], row["last_active"], row["messages"], row["bytes"])
            for row in rows
        ]

    # --- inside the write transaction -----------------------------------------------------------

    async def write_staged(self, tx: Sql, key: str, fresh: list[Staged], replace: bool) -> None:
        """Append (or replace with) staged entries inside the caller's write transaction."""
        await tx.lock(_lock(key))
        existing = [] if replace else await _read_window(tx, key)
        settings = self._settings
        window = trimmed(
            existing + fresh,
            settings.history_messages,
            settings.tool_results_turns,
            replaced=replace,
        )
        kept_seqs = [item.seq for item in window if item.seq is not None]
        if kept_seqs:
            await tx.execute("DELETE FROM messages WHERE key = ? AND seq < ?", key, kept_seqs[0])
        else:
            await tx.execute("DELETE FROM messages WHERE key = ?", key)
        found = await tx.fetch_value("SELECT next_seq FROM conversations WHERE key = ?", key)
        next_seq = int(found or 0)
        new_rows = [item for item in window if item.seq is None]
        await tx.execute_many(
            "INSERT INTO messages (key, seq, body) VALUES (?, ?, ?)",
            [(key, next_seq + i, item.body) for i, item in enumerate(new_rows)],
        )
        size = sum(len(item.body.encode("utf-8")) for item in window)
        await tx.execute(
            """INSERT INTO conversations (key, last_active, bytes, next_seq) VALUES (?, ?, ?, ?)
               ON CONFLICT (key) DO UPDATE SET last_active = excluded.last_active,
                   bytes = excluded.bytes, next_seq = excluded.next_seq""",
            key,
            self._clock(),
            size,
            next_seq + len(new_rows),
        )

    async def prune_in(self, tx: Sql, keep: str) -> None:
        """The aggregate bounds (idle days, conversations, bytes), sparing conversation `keep`,
        inside the caller's write transaction."""
        settings = self._settings
        idle = await tx.fetch_all(
            "SELECT key FROM conversations WHERE last_active < ? AND key != ? "
            "ORDER BY last_active LIMIT ?",
            self._clock() - settings.idle_days * _DAY,
            keep,
            _PRUNE_BATCH,
        )
        removed = {"idle": await _delete_all(tx, [row["key"] for row in idle])}
        count = await tx.total("conversations")
        if count > settings.max_conversations:
            surplus = await _oldest(tx, keep, count - settings.max_conversations)
            removed["count"] = await _delete_all(tx, [key for key, _ in surplus])
        total = await tx.total("history_bytes")
        removed["bytes"] = await _prune_bytes(tx, keep, total, settings.max_bytes)
        if any(removed.values()):
            log.info("history_pruned", **removed)


def trimmed(
    items: list[Staged], limit: int, keep_turns: int = 0, *, replaced: bool = False
) -> list[Staged]:
    """At most `limit` items, opened on a clean start (see `_opens_window`).

    Over the limit, the window drops to its newest half at once instead of shedding one turn's
    worth per turn: replayed history then keeps the same first message for many turns, so the
    provider's prompt cache keeps matching it. Sliding by two messages a turn would change the
    start of the history, and miss the cache, on every single turn of a long conversation.

    The newest compaction summary survives the drop: it goes first, before the kept half. At
    that moment, and when the history is `replaced` (a compaction), tool results older than the
    newest `keep_turns` turns age into short references (`bot.prompt.ageing`): the prefix
    changes then anyway. A window that changed so is written again whole (every item unsaved),
    so its rows stay in order.
    """
    if len(items) <= limit:
        kept = _clean_start(items)
        return _aged(kept, keep_turns) if replaced else kept
    half = max(limit // 2, 2)
    summary = next((item for item in reversed(items[:-half]) if item.entry.summary), None)
    kept = _clean_start(items[-half:])
    if summary is None or any(item.entry.summary for item in kept):
        return _aged(kept, keep_turns)
    return _aged([summary, *kept], keep_turns, rewrite=True)


def _aged(items: list[Staged], keep_turns: int, *, rewrite: bool = False) -> list[Staged]:
    """The items with their old tool results aged; all unsaved when any changed (or `rewrite`)."""
    entries = aged([item.entry for item in items], keep_turns)
    changed = [new is not item.entry for new, item in zip(entries, items, strict=True)]
    if not rewrite and not any(changed):
        return items
    return [
        Staged(None, new, encode_entry(new) if moved else item.body)
        for new, item, moved in zip(entries, items, changed, strict=True)
    ]


def _clean_start(items: list[Staged]) -> list[Staged]:
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


async def _read_window(tx: Sql, key: str) -> list[Staged]:
    rows = await tx.fetch_all("SELECT seq, body FROM messages WHERE key = ? ORDER BY seq", key)
    try:
        return [Staged(row["seq"], decode_entry(row["body"]), row["body"]) for row in rows]
    except UnreadableRecord as exc:
        log.warning("history_unreadable_replaced", conversation_key=key, reason=str(exc))
        return []


async def _prune_bytes(tx: Sql, keep: str, total: int, max_bytes: int) -> int:
    """Delete oldest-inactive conversations until the total fits; how many went."""
    removed = 0
    while total > max_bytes:
        gone = 0
        for key, size in await _oldest(tx, keep, _PRUNE_BATCH):
            if total <= max_bytes:
                break
            if await _delete_all(tx, [key]):
                gone += 1
                total -= size
        removed += gone
        if not gone:
            break  # only the conversation just published (or ones being published) is left
        total = await tx.total("history_bytes")
    return removed


async def _oldest(tx: Sql, keep: str, limit: int) -> list[tuple[str, int]]:
    rows = await tx.fetch_all(
        "SELECT key, bytes FROM conversations WHERE key != ? ORDER BY last_active LIMIT ?",
        keep,
        limit,
    )
    return [(row["key"], int(row["bytes"])) for row in rows]


async def _delete_all(tx: Sql, keys: list[str]) -> int:
    """Delete the conversations no other writer is publishing right now; how many went."""
    removed = 0
    for key in keys:
        if await tx.try_lock(_lock(key)) and await _delete_conversation(tx, key):
            removed += 1
    return removed


async def _delete_conversation(tx: Sql, key: str) -> bool:
    await tx.execute("DELETE FROM messages WHERE key = ?", key)
    return await tx.execute("DELETE FROM conversations WHERE key = ?", key) > 0


def _lock(key: str) -> str:
    return f"history:{key}"
