"""The per-chat buffer on PostgreSQL: the same bounds as SQLite's; `take` is one DELETE ...
RETURNING, so a buffered message goes to exactly one turn on exactly one replica."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from bot.pgstore.db import PgDatabase
from bot.ports import Buffered
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
        size: int = 50,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ):
        if size < 1:
            raise ValueError(f"chat buffer size must be at least 1, got {size}")
        self._db = db
        self._clock = clock
        self._size = size
        self._max_age = max_age_days * 86_400.0

    async def append(self, key: str, message: PrecedingMessage) -> None:
        body = _encode(message)

        async def append(conn: Any) -> None:
            now = self._clock()
            await conn.execute(
                "INSERT INTO chat_buffer (key, added_at, body) VALUES ($1, $2, $3)", key, now, body
            )
            await conn.execute(
                """DELETE FROM chat_buffer WHERE key = $1 AND id <= (SELECT id FROM chat_buffer
                       WHERE key = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)""",
                key,
                self._size,
            )
            await conn.execute("DELETE FROM chat_buffer WHERE added_at < $1", now - self._max_age)

        await self._db.write(append)

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
