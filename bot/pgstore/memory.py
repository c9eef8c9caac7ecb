"""Long-term memory on PostgreSQL (SPEC §6): tsvector full-text recall under the privacy scope.

The same attributed rows, scope rules, word choice and bounds as the SQLite store
(`bot.store.memory`); only the search differs. Each memory's text is indexed as an English
`tsvector` (stemmed, like FTS5's porter tokenizer) and a query is the OR of its chosen words,
ranked by `ts_rank` normalized by document length. Words are quoted lexemes built from the
tokenizer's letters-and-digits words, so no user text is ever read as tsquery syntax.

Scores are on another scale than BM25, so the absolute floor is not used: words in over half the
memories are dropped before searching (as on SQLite), and hits below a share of the best one are
gated out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from bot.config import MemorySettings
from bot.pgstore.db import PgDatabase
from bot.ports import MemoryCapture, MemoryHit, MemoryScope
from bot.store.fts import choose_terms, query_terms, words
from bot.store.memory import (
    RETENTION_EVERY,
    StoredMemory,
    _bounded,
    _gated,
    _hit,
    _row_id,
    _stored,
    memory_text,
)

log = structlog.get_logger(__name__)

_RANK = "ts_rank(m.tsv, q, 1)"


def tsquery_text(terms: list[str]) -> str | None:
    """A to_tsquery expression OR-ing `terms` as quoted lexemes, or None when there are none.

    A term holds only letters and digits (`bot.store.fts`), never a quote or an operator."""
    if not terms:
        return None
    return " | ".join(f"'{term}'" for term in terms)


def storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL; everything else is kept as it was said."""
    return text.replace("\x00", "\ufffd")


class PgMemory:
    """The MemoryStore port on PostgreSQL, plus operator search and forget."""

    def __init__(self, db: PgDatabase, settings: MemorySettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock

    async def capture(self, item: MemoryCapture) -> None:
        if not self._settings.enabled or not (item.user_text.strip() or item.answer.strip()):
            return
        text = storable(memory_text(item))
        captured_at = item.at.timestamp() if item.at else self._clock()

        async def capture(conn: Any) -> None:
            row_id = await conn.fetchval(
                """INSERT INTO memories (conversation_key, surface, person, text, captured_at)
                   VALUES ($1, $2, $3, $4, $5) RETURNING id""",
                storable(item.conversation_key),
                storable(item.surface),
                None if item.person is None else storable(item.person),
                text,
                captured_at,
            )
            if item.person is not None:
                await conn.execute(
                    "INSERT INTO participants (person, surface) VALUES ($1, $2) "
                    "ON CONFLICT DO NOTHING",
                    storable(item.person),
                    storable(item.surface),
                )
            # Sorted, so concurrent captures take the word rows' locks in one order.
            await conn.execute(
                """INSERT INTO term_docs (term, docs) SELECT w, 1 FROM unnest($1::text[]) w
                   ORDER BY w ON CONFLICT (term) DO UPDATE SET docs = term_docs.docs + 1""",
                sorted(words(text)),
            )
            if int(row_id) % RETENTION_EVERY == 0:
                await _retain(conn, self._settings.max_entries)

        await self._db.write(capture)

    async def recall(self, query: str, scope: MemoryScope) -> list[MemoryHit]:
        settings = self._settings
        terms = query_terms(query)
        if not settings.enabled or settings.recall_hits == 0 or not terms:
            return []
        docs, corpus = await self._frequencies(terms)
        expression = tsquery_text(choose_terms(terms, docs, corpus))
        if expression is None:
            return []
        where, params = self._scope_filter(scope, first=3)
        rows = await self._db.fetch_all(
            f"""SELECT m.id, m.text, m.surface, m.captured_at, {_RANK} AS score
                FROM memories m, to_tsquery('english', $1) q
                WHERE m.tsv @@ q AND {where}
                ORDER BY score DESC, m.id DESC LIMIT $2""",
            (expression, settings.recall_hits, *params),
        )
        hits = _gated([_hit({**dict(row), "rank": -row["score"]}) for row in rows], 0.0)
        return _bounded(hits, settings.recall_max_bytes)

    async def _frequencies(self, terms: list[str]) -> tuple[dict[str, int], int]:
        rows = await self._db.fetch_all(
            "SELECT term, docs FROM term_docs WHERE term = ANY($1::text[])", (terms,)
        )
        corpus = await self._db.fetch_value("SELECT coalesce(max(id), 0) FROM memories")
        return {row["term"]: int(row["docs"]) for row in rows}, int(corpus)

    def _scope_filter(self, scope: MemoryScope, *, first: int) -> tuple[str, tuple[Any, ...]]:
        if scope.surfaceless and self._settings.wide_console_recall:
            return "TRUE", ()
        if scope.private and scope.person is not None:
            person, surface = f"${first}", f"${first + 1}"
            return (
                f"""(m.person = {person} OR m.surface = {surface} OR m.surface IN
                       (SELECT surface FROM participants WHERE person = {person}))""",
                (scope.person, scope.surface),
            )
        return f"m.surface = ${first}", (scope.surface,)

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
            await _uncount(conn, list(words(text)))
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
    await _uncount(conn, [word for row in rows for word in words(row["text"])])
    log.info("memory_pruned", removed=excess)


async def _uncount(conn: Any, gone: list[str]) -> None:
    """One fewer memory holds each word of `gone` (a word may appear once per memory gone)."""
    await conn.execute(
        """UPDATE term_docs t SET docs = t.docs - g.n
           FROM (SELECT w, count(*) AS n FROM unnest($1::text[]) w GROUP BY w) g
           WHERE t.term = g.w""",
        sorted(gone),
    )
    await conn.execute(
        "DELETE FROM term_docs WHERE term = ANY($1::text[]) AND docs <= 0", sorted(set(gone))
    )
