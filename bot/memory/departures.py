"""People leaving shared surfaces: the `Departures` port's implementation, which ends their
memory participation there (SPEC §6, "participation expires").

A channel that hears the platform say someone left (a member-left event, a service message)
hands in a `Departure`, a small value naming the channel, the surface id and the person the way
the channel names them in its TurnRequests. The core never interprets the channel's name; it only
joins it to the surface id the same way a turn's memory scope does (`memory_surface`), so the
participation ended is exactly the one that turns in that surface recorded.
"""

from __future__ import annotations

import structlog

from bot.ports.memory import Departure, MemoryStore

log = structlog.get_logger(__name__)


def memory_surface(channel: str, surface_id: str) -> str:
    """The surface a memory is captured in and a scope recalls by: `slack:C123`."""
    return f"{channel}:{surface_id}"


class MemoryDepartures:
    """Implements `bot.ports.memory.Departures` over the memory store (None: memory is off)."""

    def __init__(self, memory: MemoryStore | None) -> None:
        self._memory = memory

    async def left(self, departure: Departure) -> None:
        if self._memory is None:
            return
        surface = memory_surface(departure.channel, departure.surface_id)
        try:
            await self._memory.left(departure.person, surface, departure.at)
        except Exception as exc:  # a channel's intake must not fail on it; logged, not raised
            log.warning(
                "memory_departure_failed", channel=departure.channel, error=type(exc).__name__
            )
            return
        log.info("memory_departure", channel=departure.channel)
