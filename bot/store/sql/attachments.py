"""The attachment store: each file's bytes kept once under its content id (sha256), with a list of
the conversations that shared it, bounded in total bytes and in days since last use.

A conversation reads only what it shared itself (`load` and `find` join on its references), so a
content id learnt elsewhere opens nothing; `forget` drops one conversation's reference (content
the model refused is never replayed there again; its bytes age out as usual). Every replay
touches what it read, so an attachment still in some conversation's history window stays; past
`store_idle_days` without a replay, or past `store_max_bytes` (least recently used first), it
goes, and history shows its marker alone.
Pruning holds one lock (`Sql.lock`), so replicas storing at once prune one at a time and never
drop what another has just stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import structlog

from bot.config import AttachmentSettings
from bot.ports.attachments import StoredAttachment
from bot.ports.sql import Sql, SqlDatabase
from bot.store.sql.conn import marks

log = structlog.get_logger(__name__)

_DAY = 86_400.0
_PRUNE_BATCH = 64
_MAX_LOAD = 500  # ids per query, well inside either engine's parameter limit
_PRUNE_LOCK = "attachments:prune"


class SqlAttachments:
    """The AttachmentStore port on the store's database."""

    def __init__(
        self, db: SqlDatabase, settings: AttachmentSettings, clock: Callable[[], float]
    ) -> None:
        self._db = db
        self._settings = settings
        self._clock = clock

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None:
        now = self._clock()

        async def put(tx: Sql) -> None:
            await tx.execute(
                """INSERT INTO attachments (id, media_type, data, bytes, stored_at, used_at)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT (id) DO UPDATE SET used_at = excluded.used_at""",
                content_id,
                media_type,
                data,
                len(data),
                now,
                now,
            )
            await tx.execute(
                "INSERT INTO attachment_refs (key, id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                key,
                content_id,
            )
            await self._prune(tx, content_id, now)

        await self._db.transaction(put)

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(content_ids))[:_MAX_LOAD]
        if not wanted:
            return {}
        rows = await self._db.reads().fetch_all(
            f"""SELECT a.id, a.data FROM attachments a
                JOIN attachment_refs r ON r.id = a.id AND r.key = ?
                WHERE a.id IN ({marks(wanted)})""",
            key,
            *wanted,
        )
        found = {str(row["id"]): bytes(row["data"]) for row in rows}
        if found:
            await self._touch(list(found))
        return found

    async def find(self, key: str, prefix: str) -> StoredAttachment | None:
        if not prefix or len(prefix) > 64 or any(c not in "0123456789abcdef" for c in prefix):
            return None
        rows = await self._db.reads().fetch_all(
            """SELECT a.id, a.media_type, a.data FROM attachments a
               JOIN attachment_refs r ON r.id = a.id AND r.key = ?
               WHERE a.id >= ? AND a.id < ? LIMIT 2""",
            key,
            prefix,
            prefix + "g",
        )
        if len(rows) != 1:
            return None
        row = rows[0]
        return StoredAttachment(str(row["id"]), str(row["media_type"]), bytes(row["data"]))

    async def forget(self, key: str, content_ids: Sequence[str]) -> None:
        wanted = list(dict.fromkeys(content_ids))[:_MAX_LOAD]
        if not wanted:
            return

        async def forget(tx: Sql) -> None:
            await tx.execute(
                f"DELETE FROM attachment_refs WHERE key = ? AND id IN ({marks(wanted)})",
                key,
                *wanted,
            )

        await self._db.transaction(forget)

    async def _touch(self, ids: list[str]) -> None:
        now = self._clock()

        async def touch(tx: Sql) -> None:
            await tx.execute(
                f"UPDATE attachments SET used_at = ? WHERE id IN ({marks(ids)})", now, *ids
            )

        try:
            await self._db.transaction(touch)
        except Exception as exc:  # only ages them sooner; never fails a turn
            log.warning("attachments_touch_failed", error=type(exc).__name__)

    async def _prune(self, tx: Sql, keep: str, now: float) -> None:
        await tx.lock(_PRUNE_LOCK)
        cutoff = now - self._settings.store_idle_days * _DAY
        idle = await tx.execute(
            "DELETE FROM attachments WHERE used_at < ? AND id != ?", cutoff, keep
        )
        dropped = 0
        total = await tx.total("attachment_bytes")
        while total > self._settings.store_max_bytes:
            oldest = await tx.fetch_all(
                "SELECT id, bytes FROM attachments WHERE id != ? ORDER BY used_at LIMIT ?",
                keep,
                _PRUNE_BATCH,
            )
            if not oldest:
                break  # only the one just stored is left; it stays
            for row in oldest:
                await tx.execute("DELETE FROM attachments WHERE id = ?", row["id"])
                dropped += 1
                total -= int(row["bytes"])
                if total <= self._settings.store_max_bytes:
                    break
        if idle or dropped:
            await tx.execute(
                "DELETE FROM attachment_refs WHERE NOT EXISTS "
                "(SELECT 1 FROM attachments a WHERE a.id = attachment_refs.id)"
            )
            log.info("attachments_pruned", idle=idle, over_bytes=dropped)
