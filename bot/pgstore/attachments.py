"""The attachment store on PostgreSQL (the AttachmentStore port), with the SQLite store's rules
(`bot.store.attachments`): each file's bytes kept once under its content id, seen only by the
conversations that shared it, bounded in total bytes (least recently used go first) and in days
since last use. Pruning runs under a transaction-level advisory lock, so replicas storing at once
prune one at a time and never drop what another has just stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from bot.config import AttachmentSettings
from bot.pgstore.db import PgDatabase
from bot.ports import StoredAttachment

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_PRUNE_BATCH = 64
_MAX_LOAD = 500  # ids per query, as on SQLite
_PRUNE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('attachments:prune', 0))"


class PgAttachments:
    """The AttachmentStore port on the shared database."""

    def __init__(
        self, db: PgDatabase, settings: AttachmentSettings, clock: Callable[[], float]
    ) -> None:
        self._db = db
        self._settings = settings
        self._clock = clock

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None:
        now = self._clock()

        async def put(conn: Any) -> None:
            await conn.execute(
                """INSERT INTO attachments (id, media_type, data, bytes, stored_at, used_at)
                   VALUES ($1, $2, $3, $4, $5, $5)
                   ON CONFLICT (id) DO UPDATE SET used_at = excluded.used_at""",
                content_id,
                media_type,
                data,
                len(data),
                now,
            )
            await conn.execute(
                "INSERT INTO attachment_refs (key, id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                key,
                content_id,
            )
            await self._prune(conn, content_id, now)

        await self._db.write(put)

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(content_ids))[:_MAX_LOAD]
        if not wanted:
            return {}
        rows = await self._db.fetch_all(
            """SELECT a.id, a.data FROM attachments a
               JOIN attachment_refs r ON r.id = a.id AND r.key = $1
               WHERE a.id = ANY($2::text[])""",
            (key, wanted),
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
               JOIN attachment_refs r ON r.id = a.id AND r.key = $1
               WHERE a.id >= $2 AND a.id < $3 LIMIT 2""",
            (key, prefix, prefix + "g"),
        )
        if len(rows) != 1:
            return None
        row = rows[0]
        return StoredAttachment(str(row["id"]), str(row["media_type"]), bytes(row["data"]))

    async def _touch(self, ids: list[str]) -> None:
        now = self._clock()

        async def touch(conn: Any) -> None:
            await conn.execute(
                "UPDATE attachments SET used_at = $1 WHERE id = ANY($2::text[])", now, ids
            )

        try:
            await self._db.write(touch)
        except Exception as exc:  # only ages them sooner; never fails a turn
            log.warning("attachments_touch_failed", error=type(exc).__name__)

    async def _prune(self, conn: Any, keep: str, now: float) -> None:
        await conn.execute(_PRUNE_LOCK)
        cutoff = now - self._settings.store_idle_days * _DAY
        status = await conn.execute(
            "DELETE FROM attachments WHERE used_at < $1 AND id != $2", cutoff, keep
        )
        idle = int(status.split()[-1])
        dropped = 0
        total = await _total(conn)
        while total > self._settings.store_max_bytes:
            oldest = await conn.fetch(
                "SELECT id, bytes FROM attachments WHERE id != $1 ORDER BY used_at LIMIT $2",
                keep,
                _PRUNE_BATCH,
            )
            if not oldest:
                break  # only the one just stored is left; it stays
            for row in oldest:
                await conn.execute("DELETE FROM attachments WHERE id = $1", row["id"])
                dropped += 1
                total -= int(row["bytes"])
                if total <= self._settings.store_max_bytes:
                    break
        if idle or dropped:
            await conn.execute(
                "DELETE FROM attachment_refs r WHERE NOT EXISTS "
                "(SELECT 1 FROM attachments a WHERE a.id = r.id)"
            )
            log.info("attachments_pruned", idle=idle, over_bytes=dropped)


async def _total(conn: Any) -> int:
    return int(await conn.fetchval("SELECT coalesce(sum(bytes), 0) FROM attachments"))
