"""Pairing (SPEC §19): people the operator admitted with a one-time code, beside the allowlists.

With `[access] unknown = "pair"`, a person who is on no allowlist and writes to the bot in private
gets a code (`ask`), valid an hour; `bot access approve CODE` admits them (`approve`) on every
engine, and from then on the channels' allowlist checks consult `admitted`. Codes are stored as a
digest only, used once, and a person gets at most a few an hour (`ask` returns None beyond).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Admitted:
    """A person admitted by code: their platform id (`telegram:4242`), the name they wrote under
    when they asked (untrusted, for the operator's listing) and when."""

    person: str
    label: str
    admitted_at: float


@dataclass(frozen=True, slots=True)
class Asking:
    """A code given out and not used yet (the code itself is never kept): who asked, when it
    expires."""

    person: str
    label: str
    asked_at: float
    expires_at: float


class Pairing(Protocol):
    async def admitted(self, person: str) -> bool:
        """Whether `person` was admitted (and not revoked since)."""

    async def ask(self, person: str, label: str) -> str | None:
        """A new one-time code for `person` (their earlier unused codes stop working), or None
        when they were given too many within the hour (or are admitted already)."""

    async def approve(self, code: str) -> Admitted | None:
        """Admit the person the code was given to, once; None for a code that is unknown,
        expired or used."""

    async def revoke(self, person: str) -> bool:
        """Take an admission back; False when `person` was not admitted."""

    async def people(self) -> list[Admitted]:
        """Everyone admitted, oldest first."""

    async def asking(self) -> list[Asking]:
        """The codes still valid, oldest first."""
