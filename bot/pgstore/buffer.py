"""The per-chat buffer on PostgreSQL: the same bounds as SQLite's; `take` is one DELETE ...
RETURNING, so a buffered message goes to exactly one turn on exactly one replica. The inbox
appends a message that starts no turn in the transaction that records its event's dedupe mark
(`append_in`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from bot.pgstore.db import PgDatabase
from bot.ports.history import Buffered, Chatter
from bot.store.buffer import DEFAULT_MAX_AGE_DAYS, _decode, _encode, buffered
from bot.turns import PrecedingMessage

log = structlog.get_logger(__name__)


class PgChatBuffer:
    """The ChatBuffer port on PostgreSQL."""

    def __init__(
        self,
        db: PgDatabase,
        clock: Callable[[], float],
        *,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ):
        self._db = db
        self._clock = clock
        self._max_age = max_age_days * 86_400.0

    async def append(self, key: str, message: PrecedingMessage, *, keep: int) -> None:
        chatter = Chatter(key, message, keep)

        async def append(conn: Any) -> None:
            await self.append_in(conn, chatter)

        await self._db.write(append)

    async def append_in(self, conn: Any, chatter: Chatter) -> None:
        """`append`, as part of a write transaction that `conn` is in."""
        key, now = chatter.key, self._clock()
        await conn.execute(
            "INSERT INTO chat_buffer (key, added_at, body) VALUES ($1, $2, $3)",
            key,
            now,
            _encode(chatter.message),
        )
        await conn.execute(
            """DELETE FROM chat_buffer WHERE key = $1 AND id <= (SELECT id FROM chat_buffer
                   WHERE key = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)""",
            key,
            chatter.keep,
        )
        await conn.execute("DELETE FROM chat_buffer WHERE added_at < $1", now - self._max_age)

    async def peek(self, key: str) -> Buffered:
        rows = await self._db.fetch_all(
            "SELECT id, body FROM chat_buffer WHERE key = $1 ORDER BY id", (key,)
        )
        return buffered(key, [(int(row["id"]), str(row["body"])) for row in rows])

    async def take(self, key: str) -> list[PrecedingMessage]:
        async def take(conn: Any) -> list[Any]:
            return list(
                await conn.fetch("DELETE FROM chat_buffer WHERE key = $1 RETURNING id, body", key)
            )

        messages = []
        for row in sorted(await self._db.write(take), key=lambda row: row["id"]):
            try:
                messages.append(_decode(row["body"]))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("chat_buffer_row_unreadable", buffer_key=key, error=type(exc).__name__)
        return messages
