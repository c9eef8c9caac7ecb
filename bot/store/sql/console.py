"""The console's sessions, refused logins and audit (`bot.ports.console.ConsoleBook`), on
either engine."""

from __future__ import annotations

from bot.ports.console import AuditEntry, ConsoleSession
from bot.ports.sql import Sql, SqlDatabase

# A session expired this long ago is dropped when another opens (an expired one is kept a while,
# so its operator is told "expired" rather than "not signed in").
_KEEP_EXPIRED = 7 * 86_400.0
_KEEP_FAILURES = 86_400.0


class SqlConsoleBook:
    """Sessions by token digest, refused logins by name, and the audit, newest first."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def open_session(self, key: str, session: ConsoleSession) -> None:
        async def op(tx: Sql) -> None:
            await tx.execute(
                "DELETE FROM console_sessions WHERE expires_at < ?",
                session.created_at - _KEEP_EXPIRED,
            )
            await tx.execute(
                "INSERT INTO console_sessions (id, operator, csrf, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?)",
                key,
                session.operator,
                session.csrf,
                session.created_at,
                session.expires_at,
            )

        await self._db.transaction(op)

    async def session(self, key: str) -> ConsoleSession | None:
        row = await self._db.reads().fetch_one(
            "SELECT operator, csrf, created_at, expires_at FROM console_sessions WHERE id = ?", key
        )
        if row is None:
            return None
        return ConsoleSession(row[0], row[1], float(row[2]), float(row[3]))

    async def close_session(self, key: str) -> None:
        await self._db.transaction(
            lambda tx: tx.execute("DELETE FROM console_sessions WHERE id = ?", key)
        )

    async def login_failed(self, name: str, at: float) -> None:
        async def op(tx: Sql) -> None:
            await tx.execute("DELETE FROM console_logins WHERE at < ?", at - _KEEP_FAILURES)
            await tx.execute("INSERT INTO console_logins (name, at) VALUES (?, ?)", name, at)

        await self._db.transaction(op)

    async def failures(self, name: str, since: float) -> int:
        found = await self._db.reads().fetch_value(
            "SELECT COUNT(*) FROM console_logins WHERE name = ? AND at >= ?", name, since
        )
        return int(found or 0)

    async def audit(self, entry: AuditEntry) -> None:
        await self._db.transaction(
            lambda tx: tx.execute(
                "INSERT INTO console_audit (at, operator, action, target, outcome) "
                "VALUES (?, ?, ?, ?, ?)",
                entry.at,
                entry.operator,
                entry.action,
                entry.target,
                entry.outcome,
            )
        )

    async def audited(self, *, limit: int = 200) -> list[AuditEntry]:
        rows = await self._db.reads().fetch_all(
            "SELECT at, operator, action, target, outcome FROM console_audit "
            "ORDER BY at DESC LIMIT ?",
            limit,
        )
        return [AuditEntry(float(r[0]), r[1], r[2], r[3], r[4]) for r in rows]
