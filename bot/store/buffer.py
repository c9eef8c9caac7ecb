"""The per-chat buffer of messages that started no turn (Telegram groups), durable and bounded.

Each chat keeps its newest `keep` messages (the channel's own bound, given on each append). A
turn reads them with `peek` (a read, so it works while the store cannot write) and the inbox
empties them up to the newest it read in the same transaction that stores the turn
(`Inbox.accept(consumes=...)`), so a message is handed to exactly one turn and never lost when
that turn could not be stored; `take` reads and empties at once. Messages older than
`max_age_days` are dropped when anything is appended, so chats that went quiet do not keep their
chatter forever. A message that starts no turn is appended by the inbox, in the transaction that
records its event's dedupe mark (`Inbox.note(chatter=...)`, through `append_in`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

import aiosqlite
import structlog

from bot.ports.history import Buffered, Chatter
from bot.store.codec import shorten
from bot.store.db import Database
from bot.turns import PrecedingMessage

log = structlog.get_logger(__name__)

DEFAULT_MAX_AGE_DAYS = 7.0
# The prompt keeps at most 2 KiB of each preceding message; keep a little more than that so the
# prompt's own bound, not the buffer's, decides what the model sees.
MESSAGE_MAX_BYTES = 4 * 1024
NAME_MAX_BYTES = 512


class SqliteChatBuffer:
    """The ChatBuffer port on the shared database."""

    def __init__(
        self,
        db: Database,
        clock: Callable[[], float],
        *,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ):
        self._db = db
        self._clock = clock
        self._max_age = max_age_days * 86_400.0

    async def append(self, key: str, message: PrecedingMessage, *, keep: int) -> None:
        chatter = Chatter(key, message, keep)

        async def append(conn: aiosqlite.Connection) -> None:
            await self.append_in(conn, chatter)

        await self._db.write(append)

    async def append_in(self, conn: aiosqlite.Connection, chatter: Chatter) -> None:
        """`append`, as part of a write transaction that `conn` is in."""
        key, now = chatter.key, self._clock()
        await conn.execute(
            "INSERT INTO chat_buffer (key, added_at, body) VALUES (?, ?, ?)",
            (key, now, _encode(chatter.message)),
        )
        await conn.execute(
            """DELETE FROM chat_buffer WHERE key = ? AND id <= (SELECT id FROM chat_buffer
                   WHERE key = ? ORDER BY id DESC LIMIT 1 OFFSET ?)""",
            (key, key, chatter.keep),
        )
        await conn.execute("DELETE FROM chat_buffer WHERE added_at < ?", (now - self._max_age,))

    async def peek(self, key: str) -> Buffered:
        rows = await self._db.fetch_all(
            "SELECT id, body FROM chat_buffer WHERE key = ? ORDER BY id", (key,)
        )
        return buffered(key, [(int(row["id"]), str(row["body"])) for row in rows])

    async def take(self, key: str) -> list[PrecedingMessage]:
        async def take(conn: aiosqlite.Connection) -> list[str]:
            async with conn.execute(
                "SELECT body FROM chat_buffer WHERE key = ? ORDER BY id", (key,)
            ) as cursor:
                bodies = [row["body"] for row in await cursor.fetchall()]
            await conn.execute("DELETE FROM chat_buffer WHERE key = ?", (key,))
            return bodies

        messages = []
        for body in await self._db.write(take):
            try:
                messages.append(_decode(body))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("chat_buffer_row_unreadable", buffer_key=key, error=type(exc).__name__)
        return messages


def _encode(message: PrecedingMessage) -> str:
    return json.dumps(
        {
            "at": message.at.isoformat(),
            "name": shorten(message.name, NAME_MAX_BYTES),
            "handle": shorten(message.handle, NAME_MAX_BYTES) if message.handle else None,
            "text": shorten(message.text, MESSAGE_MAX_BYTES),
        },
        ensure_ascii=False,
    )


def _decode(body: str) -> PrecedingMessage:
    raw = json.loads(body)
    handle = raw.get("handle")
    message = PrecedingMessage(
        at=datetime.fromisoformat(raw["at"]),
        name=str(raw["name"]),
        text=str(raw["text"]),
        handle=str(handle) if handle is not None else None,
    )
    return message


def buffered(key: str, rows: list[tuple[int, str]]) -> Buffered:
    """Rows (id, body) in id order as a `Buffered`; an unreadable row is skipped (and logged)."""
    messages = []
    for _, body in rows:
        try:
            messages.append(_decode(body))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("chat_buffer_row_unreadable", buffer_key=key, error=type(exc).__name__)
    return Buffered(tuple(messages), rows[-1][0] if rows else None)
