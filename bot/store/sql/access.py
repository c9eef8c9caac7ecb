"""Pairing's codes and admitted people (`bot.ports.access`), on either engine.

Approving is one transaction: the code's row is marked used by a conditional UPDATE (`... WHERE
used_at IS NULL AND expires_at > now`), so a code admits once even when two replicas or two
operators race, and the person's admission is written with it.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.policy.access import CODE_TTL_SECONDS, CODES_PER_HOUR, code_digest, new_code
from bot.ports.access import Admitted, Asking
from bot.ports.sql import Sql, SqlDatabase

_HOUR = 3600.0


class SqlAccess:
    """The Access port: codes given out, people admitted."""

    def __init__(self, db: SqlDatabase, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    async def admitted(self, person: str) -> bool:
        found = await self._db.reads().fetch_value(
            "SELECT 1 FROM access_people WHERE person = ?", person
        )
        return found is not None

    async def ask(self, person: str, label: str) -> str | None:
        code = new_code()
        digest = code_digest(code)
        now = self._clock()

        async def ask(tx: Sql) -> bool:
            if await tx.fetch_value("SELECT 1 FROM access_people WHERE person = ?", person):
                return False
            recent = await tx.fetch_value(
                "SELECT COUNT(*) FROM access_codes WHERE person = ? AND asked_at > ?",
                person,
                now - _HOUR,
            )
            if int(recent or 0) >= CODES_PER_HOUR:
                return False
            # Only the newest code works: the earlier ones stop (they stay, for the count).
            await tx.execute(
                "UPDATE access_codes SET expires_at = ? WHERE person = ? AND used_at IS NULL "
                "AND expires_at > ?",
                now,
                person,
                now,
            )
            await tx.execute(
                "INSERT INTO access_codes (digest, person, label, asked_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                digest,
                person,
                label,
                now,
                now + CODE_TTL_SECONDS,
            )
            await tx.execute("DELETE FROM access_codes WHERE asked_at < ?", now - 2 * _HOUR)
            return True

        return code if await self._db.transaction(ask) else None

    async def approve(self, code: str) -> Admitted | None:
        digest = code_digest(code)
        if digest is None:
            return None
        now = self._clock()

        async def approve(tx: Sql) -> Admitted | None:
            row = await tx.fetch_one(
                "UPDATE access_codes SET used_at = ? WHERE digest = ? AND used_at IS NULL "
                "AND expires_at > ? RETURNING person, label",
                now,
                digest,
                now,
            )
            if row is None:
                return None
            person, label = str(row[0]), str(row[1])
            await tx.execute(
                "INSERT INTO access_people (person, label, admitted_at) VALUES (?, ?, ?) "
                "ON CONFLICT (person) DO NOTHING",
                person,
                label,
                now,
            )
            return Admitted(person, label, now)

        return await self._db.transaction(approve)

    async def revoke(self, person: str) -> bool:
        async def revoke(tx: Sql) -> bool:
            return await tx.execute("DELETE FROM access_people WHERE person = ?", person) > 0

        return await self._db.transaction(revoke)

    async def people(self) -> list[Admitted]:
        rows = await self._db.reads().fetch_all(
            "SELECT person, label, admitted_at FROM access_people ORDER BY admitted_at, person"
        )
        return [Admitted(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    async def asking(self) -> list[Asking]:
        rows = await self._db.reads().fetch_all(
            "SELECT person, label, asked_at, expires_at FROM access_codes "
            "WHERE used_at IS NULL AND expires_at > ? ORDER BY asked_at",
            self._clock(),
        )
        return [Asking(str(r[0]), str(r[1]), float(r[2]), float(r[3])) for r in rows]
