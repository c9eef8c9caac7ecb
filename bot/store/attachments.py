"""The attachment store: each file's bytes kept once under its content id (sha256), with a list of
the conversations that shared it, bounded in total bytes and in days since last use.

A conversation reads only what it shared itself (`load` and `find` join on its references), so a
content id learnt elsewhere opens nothing. Every replay touches what it read, so an attachment
still in some conversation's history window stays; past `store_idle_days` without a replay, or
past `store_max_bytes` (least recently used first), it goes, and history shows its marker alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import aiosqlite
import structlog

from bot.config import AttachmentSettings
from bot.ports.attachments import StoredAttachment
from bot.store.db import Database

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_PRUNE_BATCH = 64
_MAX_LOAD = 500  # ids per query, well inside SQLite's parameter limit


class SqliteAttachments:
    """The AttachmentStore port on the shared database."""

    def __init__(
        self, db: Database, settings: AttachmentSettings, clock: Callable[[], float]
    ) -> None:
        self._db = db
        self._settings = settings
        self._clock = clock

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None:
        now = self._clock()

        async def put(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                """INSERT INTO attachments (id, media_type, data, bytes, stored_at, used_at)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT (id) DO UPDATE SET used_at = excluded.used_at""",
                (content_id, media_type, data, len(data), now, now),
            )
            await conn.execute(
                "INSERT OR IGNORE INTO attachment_refs (key, id) VALUES (?, ?)", (key, content_id)
            )
            await self._prune(conn, content_id, now)

        await self._db.write(put)

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(content_ids))[:_MAX_LOAD]
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = await self._db.fetch_all(
            f"""SELECT a.id, a.data FROM attachments a
                JOIN attachment_refs r ON r.id = a.id AND r.key = ?
                WHERE a.id IN ({marks})""",
            (key, *wanted),
        )
        found = {str(row["id"]): bytes(row["data"]) for row in rows}
        if found:
            await self._touch(list(found))
        return found

    async def find(self, key: str, prefix: str) -> StoredAttachment | None:
        if not prefix or len(prefix) > 64 or any(c not in "0123456789abcdef" for c in prefix):
            return None
        rows = await self._db.fetch_all(
            """SELECT a.id, a.media_type, a.data FROM attachments a
               JOIN attachment_refs r ON r.id = a.id AND r.key = ?
               WHERE a.id >= ? AND a.id < ? LIMIT 2""",
            (key, prefix, prefix + "g"),
        )
        if len(rows) != 1:
            return None
        row = rows[0]
        return StoredAttachment(str(row["id"]), str(row["media_type"]), bytes(row["data"]))

    async def _touch(self, ids: list[str]) -> None:
        now = self._clock()
        marks = ",".join("?" * len(ids))

        async def touch(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                f"UPDATE attachments SET used_at = ? WHERE id IN ({marks})", (now, *ids)
            )

        try:
            await self._db.write(touch)
        except Exception as exc:  # only ages them sooner; never fails a turn
            log.warning("attachments_touch_failed", error=type(exc).__name__)

    async def _prune(self, conn: aiosqlite.Connection, keep: str, now: float) -> None:
        cutoff = now - self._settings.store_idle_days * _DAY
        async with conn.execute(
            "DELETE FROM attachments WHERE used_at < ? AND id != ?", (cutoff, keep)
        ) as cursor:
            idle = cursor.rowcount
        dropped = 0
        while await _total(conn) > self._settings.store_max_bytes:
            async with conn.execute(
                "SELECT id FROM attachments WHERE id != ? ORDER BY used_at LIMIT ?",
                (keep, _PRUNE_BATCH),
            ) as cursor:
                oldest = [row["id"] for row in await cursor.fetchall()]
            if not oldest:
                break  # only the one just stored is left; it stays
            for content_id in oldest:
                await conn.execute("DELETE FROM attachments WHERE id = ?", (content_id,))
                dropped += 1
                if await _total(conn) <= self._settings.store_max_bytes:
                    break
        if idle or dropped:
            await conn.execute(
                "DELETE FROM attachment_refs WHERE id NOT IN (SELECT id FROM attachments)"
            )
            log.info("attachments_pruned", idle=idle, over_bytes=dropped)


async def _total(conn: aiosqlite.Connection) -> int:
    async with conn.execute("SELECT value FROM totals WHERE name = 'attachment_bytes'") as cursor:
        row = await cursor.fetchone()
    return int(row["value"]) if row else 0
