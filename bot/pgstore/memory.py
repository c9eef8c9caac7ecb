"""Long-term memory on PostgreSQL (SPEC §6): tsvector full-text recall under the privacy scope.

The same attributed rows, scope rules (participation spans that expire, `left`), hold-back of
what the request carries, relevance gate and bounds as the SQLite store: the engine-neutral parts
are `bot.sql.rules`, and the SQL filters here mirror `bot.store.memory`'s. Only the search
differs: each memory's text is indexed as an English `tsvector` (stemmed, like FTS5's porter
tokenizer), a query is the OR of its chosen words as quoted lexemes (built from the tokenizer's
letters-and-digits words, so user text is never read as tsquery syntax), ranked by `ts_rank`
normalized by document length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from bot.config import MemorySettings
from bot.pgstore.db import PgDatabase
from bot.ports.memory import MemoryCapture, MemoryHit, MemoryScope, OwnMemory, RequestHolds
from bot.sql import rules
from bot.sql.terms import choose_terms, query_terms, words
from bot.store.memory import (
    CANDIDATES_PER_HIT,
    RETENTION_EVERY,
    StoredMemory,
    _row_id,
    _said,
    _stored,
    attributed,
)

log = structlog.get_logger(__name__)

_RANK = "ts_rank(m.tsv, q, 1)"


def tsquery_text(terms: list[str]) -> str | None:
    """A to_tsquery expression OR-ing `terms` as quoted lexemes, or None when there are none.

    A term holds only letters and digits (`bot.sql.terms`), never a quote or an operator."""
    if not terms:
        return None
    return " | ".join(f"'{term}'" for term in terms)


def storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL; one character for one keeps the said-offsets right."""
    return text.replace("\x00", "\ufffd")


class _Params:
    """Numbered placeholders ($1, $2...) collected in order, for SQL built from parts."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


class PgMemory:
    """The MemoryStore port on PostgreSQL, plus operator search and forget."""

    def __init__(self, db: PgDatabase, settings: MemorySettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock
        self._window = settings.participation_window_hours * 3600

    async def capture(self, item: MemoryCapture) -> None:
        if not self._settings.enabled or not (item.user_text.strip() or item.answer.strip()):
            return
        text, said_from, said_to = attributed(item)
        text = storable(text)
        captured_at = item.at.timestamp() if item.at else self._clock()
        person = None if item.person is None else storable(item.person)
        surface = storable(item.surface)

        async def capture(conn: Any) -> None:
            row_id = await conn.fetchval(
                """INSERT INTO memories (conversation_key, surface, person, text, captured_at,
                                         turn_id, said_from, said_to)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id""",
                storable(item.conversation_key),
                surface,
                person,
                text,
                captured_at,
                item.turn_id,
                said_from,
                said_to,
            )
            if person is not None:
                await self._took_part(conn, person, surface, captured_at)
            # Sorted, so concurrent captures take the word rows' locks in one order.
            await conn.execute(
                """INSERT INTO term_docs (term, docs) SELECT w, 1 FROM unnest($1::text[]) w
                   ORDER BY w ON CONFLICT (term) DO UPDATE SET docs = term_docs.docs + 1""",
                sorted(words(text)),
            )
            if int(row_id) % RETENTION_EVERY == 0:
                await _retain(conn, self._settings.max_entries)

        await self._db.write(capture)

    async def _took_part(self, conn: Any, person: str, surface: str, at: float) -> None:
        """Extend the person's latest span there when its window touches `at`, else open one."""
        row = await conn.fetchrow(
            """SELECT id, since, until FROM participation WHERE person = $1 AND surface = $2
               ORDER BY until DESC LIMIT 1 FOR UPDATE""",
            person,
            surface,
        )
        reach = 2 * self._window
        if row is not None and row["since"] - reach <= at <= row["until"] + reach:
            await conn.execute(
                "UPDATE participation SET since = least(since, $1), until = greatest(until, $1)"
                " WHERE id = $2",
                at,
                row["id"],
            )
            return
        await conn.execute(
            "INSERT INTO participation (person, surface, since, until) VALUES ($1, $2, $3, $3)",
            person,
            surface,
            at,
        )

    async def left(self, person: str, surface: str, at: datetime) -> None:
        async def end(conn: Any) -> None:
            await conn.execute(
                "DELETE FROM participation WHERE person = $1 AND surface = $2 AND since <= $3",
                person,
                surface,
                at.timestamp(),
            )

        await self._db.write(end)
        log.info("memory_participation_ended")

    async def recall(
        self, query: str, scope: MemoryScope, holds: RequestHolds | None = None
    ) -> list[MemoryHit]:
        settings = self._settings
        holds = holds or RequestHolds()
        terms = query_terms(query)
        if not settings.enabled or settings.recall_hits == 0 or not terms:
            return []
        docs, corpus = await self._frequencies(terms)
        specific = rules.specific_terms(terms, docs, corpus)
        expression = tsquery_text(choose_terms(specific, docs, corpus))
        if expression is None:
            return []
        p = _Params()
        sql = f"""SELECT m.id, m.text, m.surface, m.captured_at, m.said_from, m.said_to,
                         {_RANK} AS score
                  FROM memories m, to_tsquery('english', {p(expression)}) q
                  WHERE m.tsv @@ q AND {self._scope_filter(scope, p)} AND {_held_filter(holds, p)}
                  ORDER BY score DESC, m.id DESC
                  LIMIT {p(settings.recall_hits * CANDIDATES_PER_HIT)}"""
        rows = await self._db.fetch_all(sql, p.values)
        return rules.select(
            [_hit(row) for row in rows],
            specific,
            rules.weights(specific, docs, corpus),
            holds.preceding,
            max_hits=settings.recall_hits,
            max_bytes=settings.recall_max_bytes,
        )

    async def _frequencies(self, terms: list[str]) -> tuple[dict[str, int], int]:
        rows = await self._db.fetch_all(
            "SELECT term, docs FROM term_docs WHERE term = ANY($1::text[])", (terms,)
        )
        # The highest id counts forgotten rows too; close enough for choosing query words.
        corpus = await self._db.fetch_value("SELECT coalesce(max(id), 0) FROM memories")
        return {row["term"]: int(row["docs"]) for row in rows}, int(corpus)

    def _scope_filter(self, scope: MemoryScope, p: _Params) -> str:
        if scope.surfaceless and self._settings.wide_console_recall:
            return "TRUE"
        if scope.private and scope.person is not None:
            person, window = p(scope.person), p(self._window)
            return f"""(m.person = {person} OR m.surface = {p(scope.surface)} OR EXISTS (
                       SELECT 1 FROM participation pa
                       WHERE pa.person = {person} AND pa.surface = m.surface
                         AND m.captured_at BETWEEN pa.since - {window} AND pa.until + {window}))"""
        return f"m.surface = {p(scope.surface)}"

    async def own(self, person: str, scope: MemoryScope, limit: int) -> tuple[list[OwnMemory], int]:
        p = _Params()
        where = _own_filter(person, scope, p)
        total = await self._db.fetch_value(
            f"SELECT count(*) FROM memories m WHERE {where}", p.values
        )
        rows = await self._db.fetch_all(
            f"""SELECT m.id, m.text, m.said_from, m.said_to, m.captured_at FROM memories m
                WHERE {where} ORDER BY m.captured_at DESC, m.id DESC LIMIT {p(limit)}""",
            p.values,
        )
        own = [
            OwnMemory(
                str(row["id"]),
                _said(row) or row["text"],
                datetime.fromtimestamp(row["captured_at"], UTC),
            )
            for row in rows
        ]
        return own, int(total)

    async def forget_own(
        self, person: str, scope: MemoryScope, ids: Sequence[str] | None = None
    ) -> int:
        p = _Params()
        where = _own_filter(person, scope, p)
        if ids is not None:
            numbers = [_row_id(memory_id) for memory_id in ids]
            if not numbers:
                return 0
            where += f" AND m.id = ANY({p(numbers)}::bigint[])"

        async def forget(conn: Any) -> int:
            gone = await conn.fetch(
                f"DELETE FROM memories AS m WHERE {where} RETURNING text", *p.values
            )
            await _uncount(conn, [row["text"] for row in gone])
            return len(gone)

        return await self._db.write(forget)

    async def search(self, query: str, *, limit: int = 20) -> list[StoredMemory]:
        """Operator search across every scope, best first, ungated."""
        expression = tsquery_text(query_terms(query))
        if expression is None:
            return []
        rows = await self._db.fetch_all(
            f"""SELECT m.* FROM memories m, to_tsquery('english', $1) q
               WHERE m.tsv @@ q ORDER BY {_RANK} DESC, m.id DESC LIMIT $2""",
            (expression, limit),
        )
        return [_stored(row) for row in rows]

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory; True when it existed."""
        row_id = _row_id(memory_id)

        async def forget(conn: Any) -> bool:
            text = await conn.fetchval("DELETE FROM memories WHERE id = $1 RETURNING text", row_id)
            if text is None:
                return False
            await _uncount(conn, [text])
            return True

        return await self._db.write(forget)

    async def count(self) -> int:
        return int(await self._db.fetch_value("SELECT count(*) FROM memories"))


async def _retain(conn: Any, limit: int) -> None:
    """Drop the oldest memories past `limit`, keeping the word counts in step."""
    excess = int(await conn.fetchval("SELECT count(*) FROM memories")) - limit
    if excess <= 0:
        return
    rows = await conn.fetch(
        """DELETE FROM memories WHERE id IN (SELECT id FROM memories ORDER BY id LIMIT $1)
           RETURNING text""",
        excess,
    )
    await _uncount(conn, [row["text"] for row in rows])
    log.info("memory_pruned", removed=excess)


async def _uncount(conn: Any, texts: Sequence[str]) -> None:
    """One fewer memory holds each word of each deleted text."""
    gone = sorted(word for text in texts for word in words(text))
    if not gone:
        return
    await conn.execute(
        """UPDATE term_docs t SET docs = t.docs - g.n
           FROM (SELECT w, count(*) AS n FROM unnest($1::text[]) w GROUP BY w) g
           WHERE t.term = g.w""",
        gone,
    )
    await conn.execute(
        "DELETE FROM term_docs WHERE term = ANY($1::text[]) AND docs <= 0", sorted(set(gone))
    )


def _held_filter(holds: RequestHolds, p: _Params) -> str:
    """Leave out memories of the replayed history window (by source conversation and time)."""
    if holds.conversation_key is None or holds.history_since is None:
        return "TRUE"
    key, since = p(holds.conversation_key), p(holds.history_since.timestamp())
    return f"NOT (m.conversation_key = {key} AND m.captured_at >= {since})"


def _own_filter(person: str, scope: MemoryScope, p: _Params) -> str:
    """The person's own memories as a scope shows them: all of them in a DM, else this surface's."""
    if scope.private:
        return f"m.person = {p(person)}"
    return f"m.person = {p(person)} AND m.surface = {p(scope.surface)}"


def _hit(row: Any) -> MemoryHit:
    return MemoryHit(
        id=str(row["id"]),
        text=row["text"],
        surface=row["surface"],
        score=float(row["score"]),
        captured_at=datetime.fromtimestamp(row["captured_at"], UTC),
        said=_said(row),
    )
