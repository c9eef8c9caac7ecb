"""Advisory lock keys for one store. PostgreSQL's advisory locks form one namespace per database,
so a lock's name is qualified by the store's schema before it is hashed to the bigint key: two
bots sharing a database, each in a schema of its own, never share a lock (else one of them would
stand by for the other's Telegram polling forever, and take its heartbeats for its own)."""

from __future__ import annotations


def key(name: str) -> str:
    """SQL for the bigint key of the lock whose name is the SQL text expression `name`."""
    return f"hashtextextended(coalesce(current_schema(), '') || ':' || {name}, 0)"
