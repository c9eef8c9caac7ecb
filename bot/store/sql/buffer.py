"""The per-chat buffer of messages that started no turn (Telegram groups), durable and bounded.

Each chat keeps its newest `keep` messages (the channel's own bound, given on each append). A
turn reads them with `peek` (a read, so it works while the store cannot write) and the inbox
empties them up to the newest it read in the same transaction that stores the turn
(`Inbox.accept(consumes=...)`), so a message is handed to exactly one turn and never lost when
that turn could not be stored; `take` reads and empties at once (one DELETE ... RETURNING, so a
message goes to one turn on one replica). Messages older than `max_age_days` are dropped when
anything is appended, so chats that went quiet do not keep their chatter forever. A message that
starts no turn is appended by the inbox, in the transaction that records its event's dedupe mark
(`Inbox.note(chatter=...)`, through `append_in`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

import structlog

from bot.ports.history import Buffered, Chatter
from bot.ports.sql import Sql, SqlDatabase
from bot.store.sql.codec import shorten
from bot.turns import PrecedingMessage

log = structlog.get_logger(__name__)

DEFAULT_MAX_AGE_DAYS = 7.0
# The prompt keeps at most 2 KiB of each preceding message; keep a little more than that so the
# prompt's own bound, not the buffer's, decides what the model sees.
MESSAGE_MAX_BYTES = 4 * 1024
NAME_MAX_BYTES = 512


class SqlChatBuffer:
    """The ChatBuffer port on the store's database."""

    def __init__(
        self,
        db: SqlDatabase,
        clock: Callable[[], float],
        *,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
    ):
        self._db = db
        self._clock = clock
        self._max_age = max_age_days * 86_400.0

    async def append(self, key: str, message: PrecedingMessage, *, keep: int) -> None:
        chatter = Chatter(key, message, keep)

        async def append(tx: Sql) -> None:
            await self.append_in(tx, chatter)

        await self._db.transaction(append)

    async def append_in(self, tx: Sql, chatter: Chatter) -> None:
        """`append`, as part of a write transaction that `tx` is in."""
        key, now = chatter.key, self._clock()
        await tx.execute(
            "INSERT INTO chat_buffer (key, added_at, body) VALUES (?, ?, ?)",
            key,
            now,
            encode_message(chatter.message),
        )
        await tx.execute(
            """DELETE FROM chat_buffer WHERE key = ? AND id <= (SELECT id FROM chat_buffer
                   WHERE key = ? ORDER BY id DESC LIMIT 1 OFFSET ?)""",
            key,
            key,
            chatter.keep,
        )
        await tx.execute("DELETE FROM chat_buffer WHERE added_at < ?", now - self._max_age)

    async def peek(self, key: str) -> Buffered:
        rows = await self._db.reads().fetch_all(
            "SELECT id, body FROM chat_buffer WHERE key = ? ORDER BY id", key
        )
        return buffered(key, [(int(row["id"]), str(row["body"])) for row in rows])

    async def take(self, key: str) -> list[PrecedingMessage]:
        async def take(tx: Sql) -> list[tuple[int, str]]:
            rows = await tx.fetch_all(
                "DELETE FROM chat_buffer WHERE key = ? RETURNING id, body", key
            )
            return sorted((int(row["id"]), str(row["body"])) for row in rows)

        return list(buffered(key, await self._db.transaction(take)).messages)


def encode_message(message: PrecedingMessage) -> str:
    return json.dumps(
        {
            "at": message.at.isoformat(),
            "name": shorten(message.name, NAME_MAX_BYTES),
            "handle": shorten(message.handle, NAME_MAX_BYTES) if message.handle else None,
            "text": shorten(message.text, MESSAGE_MAX_BYTES),
        },
        ensure_ascii=False,
    )


def decode_message(body: str) -> PrecedingMessage:
    raw = json.loads(body)
    handle = raw.get("handle")
    return PrecedingMessage(
        at=datetime.fromisoformat(raw["at"]),
        name=str(raw["name"]),
        text=str(raw["text"]),
        handle=str(handle) if handle is not None else None,
    )


def buffered(key: str, rows: list[tuple[int, str]]) -> Buffered:
    """Rows (id, body) in id order as a `Buffered`; an unreadable row is skipped (and logged)."""
    messages = []
    for _, body in rows:
        try:
            messages.append(decode_message(body))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("chat_buffer_row_unreadable", buffer_key=key, error=type(exc).__name__)
    return Buffered(tuple(messages), rows[-1][0] if rows else None)
