"""Turn records: what each turn sent and got (request as sent, usage, latency, outcome), bounded.

A record is stored as one JSON document passed through the log redactor first, so a credential
pasted into a message or echoed in an error never reaches the file. Only the
newest `turn_records_keep` records are kept, and of those only as many of the newest as fit in
`turn_records_max_bytes` (the newest one always stays).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bot.logs import redact_json
from bot.ports.records import RecordSummary, TurnRecord
from bot.ports.sql import Sql, SqlDatabase
from bot.prompt.fitting import strip_media


def record_body(record: TurnRecord) -> str:
    """The record as redacted JSON text, as stored."""
    latency = (record.finished_at - record.started_at).total_seconds() * 1000
    document = {
        "turn_id": record.turn_id,
        "conversation_key": record.conversation_key,
        "channel": record.channel,
        "started_at": record.started_at.isoformat(),
        "finished_at": record.finished_at.isoformat(),
        "latency_ms": round(latency, 1),
        "outcome": record.outcome,
        "attempts": record.attempts,
        "error": record.error,
        "usage": {
            "input_tokens": record.usage.input_tokens,
            "cache_read_tokens": record.usage.cache_read_tokens,
            "cache_write_tokens": record.usage.cache_write_tokens,
            "cache_write_1h_tokens": record.usage.cache_write_1h_tokens,
            "output_tokens": record.usage.output_tokens,
        },
        "details": dict(record.details),
        # Attachments are named by their markers; their bytes (base64 image and document
        # payloads) become short placeholders.
        "request": strip_media(record.request) if record.request is not None else None,
    }
    return redact_json(document)


class SqlTurnRecords:
    """The TurnRecords port, plus `show` and `recent` for `bot turns`."""

    def __init__(self, db: SqlDatabase, keep: int, max_bytes: int):
        self._db = db
        self._keep = keep
        self._max_bytes = max_bytes

    async def save(self, record: TurnRecord) -> None:
        if self._keep == 0:
            return
        body = self.stage(record)

        async def save(tx: Sql) -> None:
            await self.write_staged(tx, record, body)

        await self._db.transaction(save)

    def stage(self, record: TurnRecord) -> str:
        """The record's redacted document, built before the write transaction."""
        return record_body(record)

    async def write_staged(self, tx: Sql, record: TurnRecord, body: str) -> None:
        """Save a staged record inside the caller's write transaction."""
        if self._keep == 0:
            return
        # Delete, then insert (not an upsert, whose implicit delete on SQLite fires no trigger):
        # the byte total stays exact even when a turn is recorded twice.
        await tx.execute("DELETE FROM turn_records WHERE turn_id = ?", record.turn_id)
        await tx.execute(
            """INSERT INTO turn_records
                   (turn_id, conversation_key, started_at, outcome, body, bytes)
               VALUES (?, ?, ?, ?, ?, ?)""",
            record.turn_id,
            record.conversation_key,
            record.started_at.timestamp(),
            record.outcome,
            body,
            len(body.encode("utf-8")),
        )
        await tx.execute(
            """DELETE FROM turn_records WHERE seq < (
                   SELECT seq FROM turn_records ORDER BY seq DESC LIMIT 1 OFFSET ?)""",
            self._keep - 1,
        )
        await _shed_bytes(tx, self._max_bytes)

    async def show(self, turn_id: str) -> dict[str, Any] | None:
        """The whole stored record (redacted), or None."""
        body = await self._db.reads().fetch_value(
            "SELECT body FROM turn_records WHERE turn_id = ?", turn_id
        )
        if body is None:
            return None
        document: dict[str, Any] = json.loads(body)
        return document

    async def recent(
        self,
        conversation: str | None = None,
        *,
        limit: int = 20,
        since: datetime | None = None,
    ) -> list[RecordSummary]:
        """The newest records, newest first; of one conversation, and only those started
        since `since`, when given (the bodies of older ones are never read)."""
        terms: list[str] = []
        params: list[object] = []
        if conversation:
            terms.append("conversation_key = ?")
            params.append(conversation)
        if since is not None:
            terms.append("started_at >= ?")
            params.append(since.timestamp())
        where = f"WHERE {' AND '.join(terms)} " if terms else ""
        rows = await self._db.reads().fetch_all(
            f"SELECT body FROM turn_records {where}ORDER BY seq DESC LIMIT ?", *params, limit
        )
        return [summary(json.loads(row["body"])) for row in rows]


def summary(document: Mapping[str, Any]) -> RecordSummary:
    """A stored record's line in `bot turns list`."""
    usage = document.get("usage") or {}
    started = datetime.fromisoformat(document["started_at"])
    return RecordSummary(
        turn_id=document["turn_id"],
        conversation_key=document["conversation_key"],
        started_at=started if started.tzinfo else started.replace(tzinfo=UTC),
        outcome=document["outcome"],
        latency_ms=float(document.get("latency_ms", 0.0)),
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
    )


async def _shed_bytes(tx: Sql, max_bytes: int) -> None:
    """Drop the oldest records until their total fits `max_bytes`; the newest always stays."""
    if await tx.total("record_bytes") <= max_bytes:
        return
    # The newest records whose running total (newest first) fits stay, and always the newest.
    await tx.execute(
        """DELETE FROM turn_records WHERE seq < (
               SELECT coalesce(min(seq), (SELECT max(seq) FROM turn_records)) FROM (
                   SELECT seq, sum(bytes) OVER (ORDER BY seq DESC) AS running
                   FROM turn_records) newest
               WHERE running <= ?)""",
        max_bytes,
    )
