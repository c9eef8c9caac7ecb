"""Long-term memory of the in-memory store (port: `bot.ports.memory.MemoryStore`), with the SQL
engines' rules (`bot.store.sql.memory`): attributed captures, participation spans for private
recall, the privacy scope and the replayed-window hold-back, then `bot.store.sql.rules` for the
fence, the relevance gate and the bounds. Only the search is its own: words matched on light stems
(`bot.store.sql.rules.stem`), scored by BM25, where SQLite uses FTS5 and PostgreSQL a tsvector.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import structlog

from bot.config import MemorySettings
from bot.ports.memory import (
    MemoryCapture,
    MemoryHit,
    MemoryScope,
    OwnMemory,
    RequestHolds,
    StoredMemory,
)
from bot.ports.stores import OperatorMemory
from bot.store.sql import rules
from bot.store.sql.memory import CANDIDATES_PER_HIT, RETENTION_EVERY, attributed, memory_row_id
from bot.store.sql.terms import choose_terms, query_terms, words
from bot.testing.tables import MemoryRow, Opened, Span

log = structlog.get_logger(__name__)

_K1, _B = 1.2, 0.75  # BM25's usual constants


class MemoryLongTerm(OperatorMemory):
    """The MemoryStore port in memory, plus operator search and forget."""

    def __init__(self, opened: Opened, settings: MemorySettings) -> None:
        self._opened = opened
        self._settings = settings
        self._window = settings.participation_window_hours * 3600

    @property
    def _rows(self) -> dict[int, MemoryRow]:
        return self._opened.tables.memories

    async def capture(self, item: MemoryCapture) -> None:
        self._opened.check_open()
        self.write(item)

    def write(self, item: MemoryCapture) -> None:
        """Capture one exchange (StoreFault, writing nothing, when a test broke the table)."""
        if not self._settings.enabled or not (item.user_text.strip() or item.answer.strip()):
            return
        tables = self._opened.tables
        tables.check("memories", "term_docs")
        text, said_from, said_to = attributed(item)
        at = item.at.timestamp()
        row = MemoryRow(
            tables.next_id("memories"),
            item.conversation_key,
            item.surface,
            item.person,
            text,
            at,
            said_from,
            said_to,
            item.origin,
        )
        self._rows[row.row_id] = row
        if item.person is not None:
            self._took_part(item.person, item.surface, at)
        if row.row_id % RETENTION_EVERY == 0:
            self._retain(self._settings.max_entries)

    def _took_part(self, person: str, surface: str, at: float) -> None:
        """Extend the person's latest span there when its window touches `at`, else open one."""
        spans = self._opened.tables.participation
        theirs = [s for s in spans if s.person == person and s.surface == surface]
        latest = max(theirs, key=lambda s: s.until, default=None)
        reach = 2 * self._window
        if latest is not None and latest.since - reach <= at <= latest.until + reach:
            latest.since, latest.until = min(latest.since, at), max(latest.until, at)
            return
        spans.append(Span(person, surface, at, at))

    async def left(self, person: str, surface: str, at: datetime) -> None:
        tables = self._opened.write("participation")
        ended = at.timestamp()
        tables.participation = [
            s
            for s in tables.participation
            if not (s.person == person and s.surface == surface and s.since <= ended)
        ]
        log.info("memory_participation_ended")

    async def recall(
        self, query: str, scope: MemoryScope, holds: RequestHolds | None = None
    ) -> list[MemoryHit]:
        self._opened.check_open()
        settings = self._settings
        holds = holds or RequestHolds()
        terms = query_terms(query)
        if not settings.enabled or settings.recall_hits == 0 or not terms:
            return []
        docs = {term: self._docs(term) for term in terms}
        corpus = max(self._rows, default=0)
        specific = rules.specific_terms(terms, docs, corpus)
        chosen = choose_terms(specific, docs, corpus)
        if not chosen:
            return []
        visible = self._visible(scope)
        held = _held(holds)
        candidates = [
            (score, row)
            for row in self._rows.values()
            if visible(row) and not held(row) and (score := self._score(row, chosen)) > 0
        ]
        candidates.sort(key=lambda hit: (hit[0], hit[1].row_id), reverse=True)
        return rules.select(
            [
                _hit(row, score, scope.person)
                for score, row in candidates[: settings.recall_hits * CANDIDATES_PER_HIT]
            ],
            specific,
            rules.weights(specific, docs, corpus),
            holds.preceding,
            max_hits=settings.recall_hits,
            max_bytes=settings.recall_max_bytes,
        )

    def _docs(self, term: str) -> int:
        """How many memories hold `term` (as the SQL engines' `term_docs` counts them)."""
        return sum(1 for row in self._rows.values() if term in words(row.text))

    def _score(self, row: MemoryRow, chosen: Sequence[str]) -> float:
        """BM25 of the memory for the chosen terms (0 when it holds none of them)."""
        found = rules.matched(row.text, chosen)
        if not found:
            return 0.0
        count = len(self._rows)
        average = sum(len(list(words(r.text))) for r in self._rows.values()) / count
        norm = 1 + _K1 * (1 - _B + _B * len(list(words(row.text))) / max(average, 1.0))
        score = 0.0
        for term in found:
            having = sum(1 for r in self._rows.values() if rules.matched(r.text, [term]))
            score += math.log1p((count - having + 0.5) / (having + 0.5)) * (_K1 + 1) / norm
        return score

    def _visible(self, scope: MemoryScope) -> Callable[[MemoryRow], bool]:
        if scope.surfaceless and self._settings.wide_console_recall:
            return lambda row: True
        if scope.private and scope.person is not None:
            person, spans, window = scope.person, self._opened.tables.participation, self._window

            def private(row: MemoryRow) -> bool:
                return (
                    row.person == person
                    or row.surface == scope.surface
                    or any(
                        s.person == person
                        and s.surface == row.surface
                        and s.since - window <= row.captured_at <= s.until + window
                        for s in spans
                    )
                )

            return private
        return lambda row: row.surface == scope.surface

    async def own(self, person: str, scope: MemoryScope, limit: int) -> tuple[list[OwnMemory], int]:
        self._opened.check_open()
        rows = sorted(
            self._own(person, scope), key=lambda r: (r.captured_at, r.row_id), reverse=True
        )
        own = [
            OwnMemory(
                str(r.row_id),
                _said(r) or r.text,
                datetime.fromtimestamp(r.captured_at, UTC),
                r.origin,
            )
            for r in rows[:limit]
        ]
        return own, len(rows)

    async def forget_own(
        self, person: str, scope: MemoryScope, ids: Sequence[str] | None = None
    ) -> int:
        numbers = None if ids is None else {memory_row_id(memory_id) for memory_id in ids}
        self._opened.write("memories")
        gone = [
            r.row_id for r in self._own(person, scope) if numbers is None or r.row_id in numbers
        ]
        for row_id in gone:
            del self._rows[row_id]
        return len(gone)

    def _own(self, person: str, scope: MemoryScope) -> list[MemoryRow]:
        """The person's own memories as a scope shows them: all of them in a DM, else this
        surface's."""
        return [
            r
            for r in self._rows.values()
            if r.person == person and (scope.private or r.surface == scope.surface)
        ]

    async def search(self, query: str, *, limit: int = 20) -> list[StoredMemory]:
        """Operator search across every scope, best first, ungated."""
        self._opened.check_open()
        terms = query_terms(query)
        scored = [(score, row) for row in self._rows.values() if (score := self._score(row, terms))]
        scored.sort(key=lambda hit: (hit[0], hit[1].row_id), reverse=True)
        return [_stored(row) for _, row in scored[:limit]]

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory; True when it existed."""
        row_id = memory_row_id(memory_id)
        self._opened.write("memories")
        return self._rows.pop(row_id, None) is not None

    async def count(self) -> int:
        self._opened.check_open()
        return len(self._rows)

    def _retain(self, limit: int) -> None:
        """Drop the oldest memories past `limit`."""
        excess = len(self._rows) - limit
        if excess <= 0:
            return
        for row_id in sorted(self._rows)[:excess]:
            del self._rows[row_id]
        log.info("memory_pruned", removed=excess)


def _held(holds: RequestHolds) -> Callable[[MemoryRow], bool]:
    """Whether a memory is in the replayed history window (source conversation and time)."""
    key, since = holds.conversation_key, holds.history_since
    if key is None or since is None:
        return lambda row: False
    start = since.timestamp()
    return lambda row: row.conversation_key == key and row.captured_at >= start


def _said(row: MemoryRow) -> str:
    return row.text[row.said_from : row.said_to] if row.said_to else ""


def _hit(row: MemoryRow, score: float, reader: str | None) -> MemoryHit:
    return MemoryHit(
        id=str(row.row_id),
        text=row.text,
        surface=row.surface,
        score=score,
        captured_at=datetime.fromtimestamp(row.captured_at, UTC),
        said=_said(row),
        origin=row.origin,
        own=reader is not None and row.person == reader,
        answer_at=row.said_to,
    )


def _stored(row: MemoryRow) -> StoredMemory:
    return StoredMemory(
        id=str(row.row_id),
        conversation_key=row.conversation_key,
        surface=row.surface,
        person=row.person,
        text=row.text,
        captured_at=datetime.fromtimestamp(row.captured_at, UTC),
        origin=row.origin,
    )
