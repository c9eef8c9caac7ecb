"""Memory search on PostgreSQL (`bot.store.sql.memory.FullText`): each memory's text is indexed as
an
English `tsvector` (stemmed, like FTS5's porter tokenizer), a query is the OR of its chosen words
as quoted lexemes (built from the tokenizer's letters-and-digits words, so user text is never read
as tsquery syntax), ranked by `ts_rank` normalized by document length.
"""

from __future__ import annotations

from bot.store.sql.memory import FullText


def tsquery_text(terms: list[str]) -> str | None:
    """A to_tsquery expression OR-ing `terms` as quoted lexemes, or None when there are none.

    A term holds only letters and digits (`bot.store.sql.terms`), never a quote or an operator."""
    if not terms:
        return None
    return " | ".join(f"'{term}'" for term in terms)


def storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL; one character for one keeps the said-offsets right."""
    return text.replace("\x00", "\ufffd")


TSVECTOR = FullText(
    query=tsquery_text,
    source="memories m, to_tsquery('english', ?) q",
    match="m.tsv @@ q",
    score="ts_rank(m.tsv, q, 1)",
    storable=storable,
)
