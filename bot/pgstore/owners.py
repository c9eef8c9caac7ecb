"""Which replica owns which unfinished work, and taking over what a dead replica left.

Every open PostgreSQL store is one owner (a random id) and holds a session advisory lock named
after it for as long as it is open: the lock is the replica's heartbeat, and PostgreSQL drops it
when the replica's connection ends (a clean close, a SIGKILL, a vanished machine). Inbox items and
outbox parts carry their owner. On start (`Inbox.pending`, `Outbox.undelivered`) a replica takes
over only the work whose owner holds no lock any more, so a replica starting beside live ones
never runs their turns or posts their parts a second time.
"""

from __future__ import annotations

import secrets
from typing import Any

from bot.pgstore.db import PgDatabase
from bot.pgstore.leader import PgLeadership

# The key PgLeadership locks for the duty `owner:<id>` (see `duty`).
_KEY = "hashtextextended('leader:owner:' || $1, 0)"


def new_owner() -> str:
    return secrets.token_hex(8)


def duty(owner: str) -> str:
    return f"owner:{owner}"


async def take_over(db: PgDatabase, table: str, owner: str) -> None:
    """Give `owner` the unfinished rows of `table` whose owners are gone."""

    async def sweep(conn: Any) -> None:
        others = await conn.fetch(
            f"SELECT DISTINCT owner FROM {table} WHERE state = 'pending' AND owner != $1", owner
        )
        for row in others:
            gone = row["owner"]
            # Free to take: nobody holds its heartbeat. Let go at once; only its rows move.
            if await conn.fetchval(f"SELECT pg_try_advisory_lock({_KEY})", gone):
                await conn.execute(f"SELECT pg_advisory_unlock({_KEY})", gone)
                await conn.execute(
                    f"UPDATE {table} SET owner = $1 WHERE owner = $2 AND state = 'pending'",
                    owner,
                    gone,
                )

    await db.session(sweep)


async def hold(leadership: PgLeadership, owner: str) -> None:
    """Start this replica's heartbeat (held until the store closes or the process dies)."""
    await leadership.acquire(duty(owner))
