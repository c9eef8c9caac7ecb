"""The operator console's durable state (SPEC §18): server-side sessions, failed logins (for the
rate limit) and the audit of every change an operator made, kept in the shared store so that any
replica serves the console."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """One signed-in operator. The store keys it by a digest of the cookie's token (the token
    itself is never stored); `csrf` is the token every change must carry."""

    operator: str
    csrf: str
    created_at: float  # unix seconds
    expires_at: float


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One change an operator made in the console: who, what, on which target, and how it went."""

    at: float  # unix seconds
    operator: str
    action: str
    target: str
    outcome: str


class ConsoleBook(Protocol):
    async def open_session(self, key: str, session: ConsoleSession) -> None:
        """Keep `session` under `key` (a digest of its cookie token); drops long-expired ones."""

    async def session(self, key: str) -> ConsoleSession | None:
        """The session under `key`, expired or not (the caller tells an expired one apart)."""

    async def close_session(self, key: str) -> None: ...

    async def login_failed(self, name: str, at: float) -> None:
        """Count one refused login for the operator name `name`."""

    async def failures(self, name: str, since: float) -> int:
        """Refused logins for `name` since `since`."""

    async def audit(self, entry: AuditEntry) -> None: ...

    async def audited(self, *, limit: int = 200) -> list[AuditEntry]:
        """The newest changes first."""
