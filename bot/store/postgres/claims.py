"""Which replica runs which conversation (the `bot.ports.intake.WorkShare` port) on PostgreSQL.

The rules, per conversation. Every step on a conversation runs in one transaction under an
advisory lock on its key, so steps of different replicas on one conversation never interleave:

1. An accepted item is nobody's (`owner = ''`). A pending item or undelivered part otherwise names
   the replica that runs or posts it.
2. A replica adopts a conversation only when no *live* replica but itself owns a pending item or
   an undelivered part of it, and then takes all of it at once: the unowned items, and whatever a
   gone replica left (its parts are posted before anything newer).
3. Hence the owned items of a conversation are always the oldest ones, all of one replica, which
   runs them in accepted order on one lane; whoever finishes them takes the newer ones on next
   (`adopt` again), and if it dies first, any live replica does (`orphaned`, then `adopt`).
4. Publishing a turn's end checks the item is still the publisher's (`owners.Replica.finish`), so
   work adopted from a replica taken for gone is never published twice.
"""

from __future__ import annotations

from typing import Any

from bot.ports.intake import Adopted
from bot.store.postgres.db import PgDatabase
from bot.store.postgres.locks import key
from bot.store.postgres.owners import is_live
from bot.store.sql.request_codec import inbox_items, outbox_parts

_LOCK = "SELECT pg_advisory_xact_lock(" + key("'conversation:' || $1") + ")"
_OWNERS = """SELECT owner FROM inbox WHERE conversation_key = $1 AND state = 'pending'
               AND owner NOT IN ('', $2)
             UNION
             SELECT owner FROM outbox WHERE conversation_key = $1 AND state = 'pending'
               AND owner NOT IN ('', $2)"""
_TAKE_PARTS = """UPDATE outbox SET owner = $2
    WHERE conversation_key = $1 AND state = 'pending' AND owner != $2
    RETURNING id, part_id, turn_id, conversation_key, idx, route, text, platform_id"""
_TAKE_ITEMS = """UPDATE inbox SET owner = $2 FROM (
        SELECT id, owner FROM inbox
        WHERE conversation_key = $1 AND state = 'pending' AND owner != $2) AS was
    WHERE inbox.id = was.id
    RETURNING inbox.id, inbox.attempts, inbox.request, was.owner AS was"""
_ORPHANED = f"""SELECT conversation_key FROM (
        SELECT conversation_key, owner, id FROM inbox WHERE state = 'pending'
        UNION ALL
        SELECT conversation_key, owner, id FROM outbox WHERE state = 'pending') AS work
    GROUP BY conversation_key
    HAVING bool_and(owner = '' OR NOT {is_live("owner")})
    ORDER BY min(id) LIMIT $1"""


class PgWorkShare:
    """This replica's side of sharing the inbox with the others on the database."""

    def __init__(self, db: PgDatabase, owner: str) -> None:
        self._db = db
        self._owner = owner

    async def adopt(self, conversation_key: str) -> Adopted:
        async def take(conn: Any) -> Adopted:
            await conn.execute(_LOCK, conversation_key)
            others = [row["owner"] for row in await conn.fetch(_OWNERS, conversation_key, me)]
            if others and await conn.fetchval(
                f"SELECT bool_or({is_live('owner')}) FROM unnest($1::text[]) AS owner", others
            ):
                return Adopted()
            parts = sorted(await conn.fetch(_TAKE_PARTS, conversation_key, me), key=_id)
            items = sorted(await conn.fetch(_TAKE_ITEMS, conversation_key, me), key=_id)
            return Adopted(
                tuple(outbox_parts(parts)),
                tuple(inbox_items(items)),
                frozenset(int(row["id"]) for row in items if row["was"]),
            )

        me = self._owner
        return await self._db.write(take)

    async def orphaned(self, limit: int) -> list[str]:
        rows = await self._db.fetch_all(_ORPHANED, (limit,))
        return [str(row["conversation_key"]) for row in rows]


def _id(row: Any) -> int:
    return int(row["id"])
