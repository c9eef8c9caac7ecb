"""Turning a query's words into a safe SQLite FTS5 MATCH expression.

User text is never passed to MATCH as query syntax: `bot.sql.terms` cuts it into word tokens, each
token becomes a double-quoted FTS5 string (a token holds no quote, so none needs escaping), and the
strings are OR-ed.
"""

from __future__ import annotations


def match_expression(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression OR-ing `terms`, or None when there are none."""
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)
