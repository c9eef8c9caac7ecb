"""Memory search on SQLite (`bot.store.sql.memory.FullText`): an FTS5 index of each memory's text,
ranked by BM25.

User text is never passed to MATCH as query syntax: `bot.store.sql.terms` cuts it into word tokens,
each token becomes a double-quoted FTS5 string (a token holds no quote, so none needs escaping), and
the strings are OR-ed.
"""

from __future__ import annotations

from bot.store.sql.memory import FullText


def match_expression(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression OR-ing `terms`, or None when there are none."""
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


FTS5 = FullText(
    query=match_expression,
    source="memories_fts JOIN memories m ON m.id = memories_fts.rowid",
    match="memories_fts MATCH ?",
    score="-bm25(memories_fts)",  # BM25 is lower for a better match
)
