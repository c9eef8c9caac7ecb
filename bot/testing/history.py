"""Conversation history and the chat buffer of the in-memory store (ports: `bot.ports.history`),
bounded as the SQL engines bound them (`bot.store.sql.history`, `bot.store.sql.buffer`): entries are
bounded and encoded as stored, the window trimmed to `history_messages` on a clean start, and other
conversations pruned by idle days, count and bytes after each publish.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from bot.config import StoreSettings
from bot.ports.history import Buffered, ChatBuffer, Chatter, ConversationInfo
from bot.ports.stores import OperatorHistory
from bot.store.sql.buffer import DEFAULT_MAX_AGE_DAYS, buffered, encode_message
from bot.store.sql.codec import bound_entry, decode_entry, encode_entry
from bot.store.sql.history import Staged, trimmed
from bot.testing.tables import BufferRow, ConversationRow, Opened
from bot.turns import HistoryEntry, PrecedingMessage

log = structlog.get_logger(__name__)

_DAY = 86_400.0


class MemoryHistory(OperatorHistory):
    """The HistoryStore port in memory, plus `describe` for `bot history`."""

    def __init__(self, opened: Opened, settings: StoreSettings) -> None:
        self._opened = opened
        self._settings = settings
        self._conversations = opened.tables.conversations

    async def load(self, key: str) -> list[HistoryEntry]:
        self._opened.check_open()
        found = self._conversations.get(key)
        return [] if found is None else [decode_entry(item.body) for item in found.window]

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        fresh = self.stage(entries)
        self._opened.write("messages")
        self.write(key, fresh, replace)
        self.prune(key)

    async def reset(self, key: str) -> bool:
        self._opened.write("messages")
        return self._conversations.pop(key, None) is not None

    async def conversations(self) -> list[str]:
        self._opened.check_open()
        return [info.key for info in await self.describe()]

    async def describe(self) -> list[ConversationInfo]:
        """Every conversation with its size and activity, most recently active first."""
        self._opened.check_open()
        return [
            ConversationInfo(key, found.last_active, len(found.window), found.bytes)
            for key, found in sorted(
                self._conversations.items(), key=lambda kv: kv[1].last_active, reverse=True
            )
        ]

    def stage(self, entries: Sequence[HistoryEntry]) -> list[Staged]:
        """Bound and encode entries as the SQL engines store them."""
        limit = self._settings.message_max_bytes
        return [Staged(None, e, encode_entry(e)) for e in (bound_entry(e, limit) for e in entries)]

    def write(self, key: str, fresh: list[Staged], replace: bool) -> None:
        """Append (or replace with) staged entries; the caller checked the write may happen."""
        found = self._conversations.get(key)
        existing = [] if replace or found is None else found.window
        settings = self._settings
        window = trimmed(
            [*existing, *fresh],
            settings.history_messages,
            settings.tool_results_turns,
            replaced=replace,
        )
        self._conversations[key] = ConversationRow(self._opened.tables.clock(), window)

    def prune(self, keep: str) -> None:
        """The aggregate bounds (idle days, conversations, bytes), sparing conversation `keep`."""
        settings = self._settings
        idle_before = self._opened.tables.clock() - settings.idle_days * _DAY
        oldest = sorted(
            (item for item in self._conversations.items() if item[0] != keep),
            key=lambda kv: kv[1].last_active,
        )
        removed = {"idle": 0, "count": 0, "bytes": 0}
        total = sum(found.bytes for found in self._conversations.values())
        for key, found in oldest:
            if found.last_active < idle_before:
                reason = "idle"
            elif len(self._conversations) > settings.max_conversations:
                reason = "count"
            elif total > settings.max_bytes:
                reason = "bytes"
            else:
                continue
            del self._conversations[key]
            total -= found.bytes
            removed[reason] += 1
        if any(removed.values()):
            log.info("history_pruned", **removed)


class MemoryChatBuffer(ChatBuffer):
    """The ChatBuffer port in memory: each chat's newest `keep` messages, none older than
    `max_age_days`, stored in their bounded form (`bot.store.sql.buffer.encode_message`)."""

    def __init__(self, opened: Opened, *, max_age_days: float = DEFAULT_MAX_AGE_DAYS) -> None:
        self._opened = opened
        self._max_age = max_age_days * _DAY
        self._rows = opened.tables.chat_buffer  # key -> rows, oldest first

    async def append(self, key: str, message: PrecedingMessage, *, keep: int) -> None:
        self._opened.write("chat_buffer")
        self.add(Chatter(key, message, keep))

    def add(self, chatter: Chatter) -> None:
        """Buffer the chatter; the caller checked the write may happen."""
        tables = self._opened.tables
        now = tables.clock()
        rows = self._rows.setdefault(chatter.key, [])
        rows.append(BufferRow(tables.next_id("chat_buffer"), now, encode_message(chatter.message)))
        del rows[: max(len(rows) - chatter.keep, 0)]
        for key, kept in list(self._rows.items()):
            self._rows[key] = [row for row in kept if row.added_at >= now - self._max_age]

    def drop_upto(self, key: str, upto: int) -> None:
        """Empty the chat's buffer up to row `upto` (what an accepted turn read)."""
        self._rows[key] = [row for row in self._rows.get(key, []) if row.row_id > upto]

    async def peek(self, key: str) -> Buffered:
        self._opened.check_open()
        return buffered(key, [(row.row_id, row.body) for row in self._rows.get(key, [])])

    async def take(self, key: str) -> list[PrecedingMessage]:
        self._opened.write("chat_buffer")
        rows = self._rows.pop(key, [])
        return list(buffered(key, [(row.row_id, row.body) for row in rows]).messages)
