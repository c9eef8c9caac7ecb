"""The console's sessions, refused logins and audit in memory, with the SQL engines' rules
(`bot.store.sql.console`)."""

from __future__ import annotations

from bot.errors import DuplicateKey
from bot.ports.console import AuditEntry, ConsoleBook, ConsoleSession
from bot.testing.tables import Opened

_KEEP_EXPIRED = 7 * 86_400.0  # as bot.store.sql.console keeps them


class MemoryConsoleBook(ConsoleBook):
    """The ConsoleBook port in memory."""

    def __init__(self, opened: Opened) -> None:
        self._opened = opened

    async def open_session(self, key: str, session: ConsoleSession) -> None:
        sessions = self._opened.write("console_sessions").console_sessions
        if key in sessions:
            raise DuplicateKey(f"console_sessions: {key} is stored already")
        for gone in [
            k for k, s in sessions.items() if s.expires_at < session.created_at - _KEEP_EXPIRED
        ]:
            del sessions[gone]
        sessions[key] = session

    async def session(self, key: str) -> ConsoleSession | None:
        self._opened.check_open()
        return self._opened.tables.console_sessions.get(key)

    async def close_session(self, key: str) -> None:
        self._opened.write("console_sessions").console_sessions.pop(key, None)

    async def login_failed(self, name: str, at: float) -> None:
        self._opened.write("console_logins").console_logins.append((name, at))

    async def failures(self, name: str, since: float) -> int:
        self._opened.check_open()
        return sum(
            1 for who, at in self._opened.tables.console_logins if who == name and at >= since
        )

    async def audit(self, entry: AuditEntry) -> None:
        self._opened.write("console_audit").console_audit.append(entry)

    async def audited(self, *, limit: int = 200) -> list[AuditEntry]:
        self._opened.check_open()
        newest = reversed(self._opened.tables.console_audit)  # the later of two at one time first
        return sorted(newest, key=lambda e: e.at, reverse=True)[:limit]
