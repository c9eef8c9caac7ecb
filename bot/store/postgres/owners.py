"""Which replica owns which unfinished work, and telling a live replica from a gone one.

Every open PostgreSQL store is one owner (a random id) and holds a session advisory lock named
after it for as long as it is open: the lock is the replica's heartbeat, and PostgreSQL drops it
when the replica's connection ends (a clean close, a SIGKILL, a vanished machine). Inbox items and
outbox parts carry their owner (`''` for an item nobody has adopted yet). Whether an owner is live
is read from `pg_locks` (a read: it takes no lock, so any number of replicas may ask at once).

`Replica` is this replica's side of the inbox and outbox (`bot.store.sql.inbox.Owners`): an accepted
item is nobody's until a replica adopts its conversation (`bot.store.postgres.claims`); a replica
runs the pending items that are its own or nobody's, posts only its own parts, publishes parts as
its own, and finishes an item only while it is still its own (else `ClaimLost`, and nothing of the
publication is written).
"""

from __future__ import annotations

import secrets

from bot.errors import ClaimLost
from bot.ports.outbox import InboxState
from bot.ports.sql import Sql
from bot.store.postgres.leader import PgLeadership
from bot.store.postgres.locks import key
from bot.store.sql.inbox import Owners
from bot.store.sql.request_codec import PartRow

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
    return key("'leader:owner:' || " + column) + f" IN ({_HELD_KEYS})"


async def hold(leadership: PgLeadership, owner: str) -> None:
    """Start this replica's heartbeat (held until the store closes or the process dies)."""
    await leadership.acquire(duty(owner))


class Replica(Owners):
    """The work of one replica among several on the database."""

    def __init__(self, owner: str = "") -> None:
        self._owner = owner

    def items(self) -> tuple[str, tuple[str, ...]]:
        return "owner IN ('', ?)", (self._owner,)

    def parts(self) -> tuple[str, tuple[str, ...]]:
        return "owner = ?", (self._owner,)

    async def add_parts(self, tx: Sql, parts: list[PartRow], now: float) -> None:
        await tx.execute_many(
            """INSERT INTO outbox (part_id, turn_id, conversation_key, idx, route, text,
                   platform_id, created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [(*part, now, self._owner) for part in parts],
        )

    async def finish(
        self,
        tx: Sql,
        item_id: int,
        state: InboxState,
        now: float,
        consumed_by: str | None = None,
    ) -> None:
        # Still ours (or never adopted, as in store-level use): else roll it all back.
        found = await tx.fetch_value(
            """UPDATE inbox SET state = ?, finished_at = ?, consumed_by = ?
               WHERE id = ? AND owner IN ('', ?) RETURNING id""",
            state.value,
            now,
            consumed_by,
            item_id,
            self._owner,
        )
        if found is None:
            raise ClaimLost(f"inbox item {item_id} is another replica's now")
