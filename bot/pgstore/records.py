"""Turn records on PostgreSQL: the same redacted documents and bounds as the SQLite store."""

from __future__ import annotations

import json
from typing import Any

from bot.pgstore.db import PgDatabase
from bot.ports.records import TurnRecord
from bot.store.records import RecordSummary, _summary, record_document


class PgTurnRecords:
    """The TurnRecords port, plus `show` and `recent` for `bot turns`."""

    def __init__(self, db: PgDatabase, keep: int, max_bytes: int):
        self._db = db
        self._keep = keep
        self._max_bytes = max_bytes

    async def save(self, record: TurnRecord) -> None:
        if self._keep == 0:
            return
        body = self.stage(record)

        async def save(conn: Any) -> None:
            await self.write_staged(conn, record, body)

        await self._db.write(save)

    def stage(self, record: TurnRecord) -> str:
        """The record's redacted document, built before the transaction."""
        return json.dumps(record_document(record), ensure_ascii=False)

    async def write_staged(self, conn: Any, record: TurnRecord, body: str) -> None:
        """Save a staged record inside the caller's transaction."""
        if self._keep == 0:
            return
        await conn.execute("DELETE FROM turn_records WHERE turn_id = $1", record.turn_id)
        await conn.execute(
            """INSERT INTO turn_records
                   (turn_id, conversation_key, started_at, outcome, body, bytes)
               VALUES ($1, $2, $3, $4, $5, $6)""",
            record.turn_id,
            record.conversation_key,
            record.started_at.timestamp(),
            record.outcome,
            body,
            len(body.encode("utf-8")),
        )
        await conn.execute(
            """DELETE FROM turn_records WHERE seq < (
                   SELECT seq FROM turn_records ORDER BY seq DESC LIMIT 1 OFFSET $1)""",
            self._keep - 1,
        )
        await _shed_bytes(conn, self._max_bytes)

    async def show(self, turn_id: str) -> dict[str, Any] | None:
        """The whole stored record (redacted), or None."""
        body = await self._db.fetch_value(
            "SELECT body FROM turn_records WHERE turn_id = $1", (turn_id,)
        )
        if body is None:
            return None
        document: dict[str, Any] = json.loads(body)
        return document

    async def recent(
        self, conversation: str | None = None, *, limit: int = 20
    ) -> list[RecordSummary]:
        """The newest records, newest first; of one conversation when given."""
        if conversation:
            rows = await self._db.fetch_all(
                "SELECT body FROM turn_records WHERE conversation_key = $1 "
                "ORDER BY seq DESC LIMIT $2",
                (conversation, limit),
            )
        else:
            rows = await self._db.fetch_all(
                "SELECT body FROM turn_records ORDER BY seq DESC LIMIT $1", (limit,)
            )
        return [_summary(json.loads(row["body"])) for row in rows]


async def _shed_bytes(conn: Any, max_bytes: int) -> None:
    """Drop the oldest records until their total fits `max_bytes`; the newest always stays."""
    total = int(await conn.fetchval("SELECT coalesce(sum(bytes), 0) FROM turn_records"))
    if total <= max_bytes:
        return
    # The newest records whose running total (newest first) fits stay, and always the newest.
    await conn.execute(
        """DELETE FROM turn_records WHERE seq < (
               SELECT coalesce(min(seq), (SELECT max(seq) FROM turn_records)) FROM (
                   SELECT seq, sum(bytes) OVER (ORDER BY seq DESC) AS running
                   FROM turn_records) newest
               WHERE running <= $1)""",
        max_bytes,
    )
