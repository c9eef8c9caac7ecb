"""Delivery: a channel's way back to the platform, and the honest report of what it took."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from bot.turns import ReplyRoute


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """Honest delivery status: `delivered` only when the platform accepted every part."""

    parts: int
    accepted: int
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.error is None and self.accepted == self.parts


class Deliverer(Protocol):
    """A channel's way back to the platform; the only reader of a ReplyRoute's values."""

    async def deliver(self, route: ReplyRoute, text: str) -> DeliveryReport:
        """Format, split and post `text` through `route`, in order, retrying rate limits."""

    def working(self, route: ReplyRoute) -> AbstractAsyncContextManager[None]:
        """Show a progress sign (reaction, typing...) for as long as the context is open."""

    def route_to(self, destination: str) -> ReplyRoute:
        """A top-level route to a destination id (a Slack channel id, a Telegram chat id)."""
