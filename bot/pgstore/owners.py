"""Which replica owns which unfinished work, and telling a live replica from a gone one.

Every open PostgreSQL store is one owner (a random id) and holds a session advisory lock named
after it for as long as it is open: the lock is the replica's heartbeat, and PostgreSQL drops it
when the replica's connection ends (a clean close, a SIGKILL, a vanished machine). Inbox items and
outbox parts carry their owner (`''` for an item nobody has adopted yet). Whether an owner is live
is read from `pg_locks` (a read: it takes no lock, so any number of replicas may ask at once).
"""

from __future__ import annotations

import secrets

from bot.pgstore.leader import PgLeadership

# Keys of the advisory locks held in this database, as the bigint `pg_advisory_lock` took.
_HELD_KEYS = """SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks
    WHERE locktype = 'advisory' AND objsubid = 1 AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""


def new_owner() -> str:
    return secrets.token_hex(8)


def duty(owner: str) -> str:
    return f"owner:{owner}"


def is_live(column: str) -> str:
    """SQL true when the owner in `column` holds its heartbeat (PgLeadership's key for `duty`)."""
    return f"hashtextextended('leader:owner:' || {column}, 0) IN ({_HELD_KEYS})"


async def hold(leadership: PgLeadership, owner: str) -> None:
    """Start this replica's heartbeat (held until the store closes or the process dies)."""
    await leadership.acquire(duty(owner))
