"""Turn records and the usage ledger of the in-memory store (ports: `bot.ports.records`), kept
as the SQL engines keep them (`bot.store.sql.records`, `bot.store.sql.usage`): a record is its
redacted JSON document, bounded by count and bytes (the newest always stays); usage is one row per
turn, summed for budgets; a budget notice is marked once.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.ports.records import RecordSummary, Spent, TurnRecord, UsageEntry
from bot.ports.stores import OperatorRecords, OperatorUsage
from bot.store.sql.records import record_body, summary
from bot.testing.tables import Opened


class MemoryTurnRecords(OperatorRecords):
    """The TurnRecords port in memory, plus `show` and `recent` for `bot turns`."""

    def __init__(self, opened: Opened, keep: int, max_bytes: int) -> None:
        self._opened = opened
        self._keep = keep
        self._max_bytes = max_bytes

    async def save(self, record: TurnRecord) -> None:
        self._opened.write("turn_records")
        self.write(record)

    def write(self, record: TurnRecord) -> None:
        """Keep the record (the caller checked the write may happen), then the bounds."""
        if self._keep == 0:
            return
        tables = self._opened.tables
        kept = tables.records
        kept.pop(record.turn_id, None)
        kept[record.turn_id] = (tables.next_id("turn_records"), record_body(record))
        newest = sorted(kept.items(), key=lambda item: item[1][0], reverse=True)
        staying: list[str] = []
        total = 0
        for turn_id, (_, body) in newest[: self._keep]:
            total += len(body.encode("utf-8"))
            if staying and total > self._max_bytes:
                break
            staying.append(turn_id)
        for turn_id in set(kept) - set(staying):
            del kept[turn_id]

    async def show(self, turn_id: str) -> dict[str, Any] | None:
        """The whole stored record (redacted), or None."""
        self._opened.check_open()
        found = self._opened.tables.records.get(turn_id)
        if found is None:
            return None
        document: dict[str, Any] = json.loads(found[1])
        return document

    async def recent(
        self,
        conversation: str | None = None,
        *,
        limit: int = 20,
        since: datetime | None = None,
    ) -> list[RecordSummary]:
        """The newest records, newest first; of one conversation, and only those started
        since `since`, when given."""
        self._opened.check_open()
        documents = [
            json.loads(body)
            for _, body in sorted(self._opened.tables.records.values(), reverse=True)
        ]
        found = [
            summary(document)
            for document in documents
            if not conversation or document["conversation_key"] == conversation
        ]
        return [s for s in found if since is None or s.started_at >= since][:limit]


class MemoryUsage(OperatorUsage):
    """The UsageLedger port in memory, plus `rows` for `bot usage`."""

    def __init__(self, opened: Opened) -> None:
        self._opened = opened

    async def add(self, entry: UsageEntry) -> None:
        self._opened.write("usage")
        self.write(entry)

    def write(self, entry: UsageEntry) -> None:
        """Count the entry (a turn charged again replaces its row)."""
        self._opened.tables.usage[entry.turn_id] = entry

    async def spent(
        self, since: datetime, *, surface: str | None = None, person: str | None = None
    ) -> Spent:
        self._opened.check_open()
        rows = [
            entry
            for entry in self._opened.tables.usage.values()
            if entry.at >= since
            and (surface is None or entry.surface == surface)
            and (person is None or entry.person == person)
        ]
        return Spent(
            sum(entry.usage.total for entry in rows), sum(entry.cost_usd for entry in rows)
        )

    async def first_notice(self, scope: str, period: str) -> bool:
        tables = self._opened.write("budget_notices")
        if (scope, period) in tables.notices:
            return False
        tables.notices[(scope, period)] = tables.clock()
        return True

    async def rows(self, since: datetime | None = None) -> list[UsageEntry]:
        """Every stored turn since `since` (all when None), oldest first."""
        self._opened.check_open()
        return sorted(
            (e for e in self._opened.tables.usage.values() if since is None or e.at >= since),
            key=lambda e: (e.at, e.turn_id),
        )
