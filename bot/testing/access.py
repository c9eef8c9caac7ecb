"""Pairing's codes and admitted people in memory (`bot.ports.access`), as `bot.store.sql.access`
keeps them."""

from __future__ import annotations

from bot.policy.access import CODE_TTL_SECONDS, CODES_PER_HOUR, code_digest, new_code
from bot.ports.access import Admitted, Asking, Pairing
from bot.testing.tables import CodeRow, Opened

_HOUR = 3600.0


class MemoryAccess(Pairing):
    def __init__(self, opened: Opened) -> None:
        self._opened = opened

    async def admitted(self, person: str) -> bool:
        self._opened.check_open()
        return person in self._opened.tables.access_people

    async def ask(self, person: str, label: str) -> str | None:
        tables = self._opened.write("access_codes")
        now = tables.clock()
        codes = tables.access_codes
        recent = [row for row in codes.values() if row.person == person]
        if (
            person in tables.access_people
            or sum(row.asked_at > now - _HOUR for row in recent) >= CODES_PER_HOUR
        ):
            return None
        for row in recent:  # only the newest code works
            if row.used_at is None and row.expires_at > now:
                row.expires_at = now
        code = new_code()
        digest = code_digest(code)
        assert digest is not None
        codes[digest] = CodeRow(person, label, now, now + CODE_TTL_SECONDS)
        return code

    async def approve(self, code: str) -> Admitted | None:
        tables = self._opened.write("access_codes", "access_people")
        now = tables.clock()
        row = tables.access_codes.get(code_digest(code) or "")
        if row is None or row.used_at is not None or row.expires_at <= now:
            return None
        row.used_at = now
        admitted = Admitted(row.person, row.label, now)
        tables.access_people.setdefault(row.person, admitted)
        return admitted

    async def revoke(self, person: str) -> bool:
        tables = self._opened.write("access_people")
        return tables.access_people.pop(person, None) is not None

    async def people(self) -> list[Admitted]:
        self._opened.check_open()
        people = self._opened.tables.access_people.values()
        return sorted(people, key=lambda a: (a.admitted_at, a.person))

    async def asking(self) -> list[Asking]:
        self._opened.check_open()
        tables = self._opened.tables
        now = tables.clock()
        rows = [r for r in tables.access_codes.values() if r.used_at is None and r.expires_at > now]
        rows.sort(key=lambda r: r.asked_at)
        return [Asking(r.person, r.label, r.asked_at, r.expires_at) for r in rows]
