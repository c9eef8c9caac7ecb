"""A lane's unit of work (`Job`): one turn, or the parts an earlier process left undelivered."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot import tracing
from bot.ports.outbox import OutboxPart
from bot.turns import TurnRequest


@dataclass(frozen=True, slots=True)
class Job:
    """One piece of a lane's work: a turn (from the inbox when `item_id` is set), or the parts
    an earlier process left undelivered in this conversation."""

    request: TurnRequest | None
    item_id: int | None = None
    leftovers: tuple[OutboxPart, ...] = ()
    resumed: bool = False  # found pending at start: it may have run (and stopped) before
    trace: tracing.TurnTrace = field(default=tracing.NO_TURN, compare=False)  # opened at intake

    @property
    def turn_id(self) -> str:
        return self.request.turn_id if self.request else "leftovers"

    @property
    def conversation_key(self) -> str:
        """The conversation whose lane runs it."""
        if self.leftovers:
            return self.leftovers[0].conversation_key
        return self.request.conversation_key if self.request else ""


def open_trace(request: TurnRequest) -> tracing.TurnTrace:
    return tracing.open_turn(
        turn_id=request.turn_id, channel=request.channel, kind=request.kind.value
    )
