"""Leadership: one holder at a time, among replicas, of a duty that must not run twice."""

from __future__ import annotations

from typing import Protocol


class Leadership(Protocol):
    """One holder at a time, among every replica on a shared store, of a named duty that must
    not run twice (Telegram long polling). Held until released, or until the holder dies."""

    async def acquire(self, duty: str) -> None:
        """Wait until this process holds `duty` (another replica's death hands it over)."""

    def holds(self, duty: str) -> bool:
        """Whether this process holds `duty` now (a lost connection loses it; it is taken
        again as soon as nobody else holds it)."""

    async def release(self, duty: str) -> None: ...
