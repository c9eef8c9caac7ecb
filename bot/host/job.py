"""A lane's unit of work (`Job`): one turn, or the parts an earlier process left undelivered."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from bot import tracing
from bot.ports.intake import TurnResult
from bot.ports.outbox import OutboxPart
from bot.turns import HistoryEntry, TurnRequest


@dataclass(eq=False)
class Absorbed:
    """The inbox items a turn took in beside its own (steered or collected, SPEC §19): they end
    with its publication, marked as consumed by it; their callers get its result; their words
    are in its continuity account should it not complete."""

    items: list[int] = field(default_factory=list)
    futures: list[asyncio.Future[TurnResult]] = field(default_factory=list)
    entries: list[HistoryEntry] = field(default_factory=list)

    def settle(self, result: TurnResult) -> None:
        """Tell the absorbed items' callers how the turn that took them in ended."""
        for future in self.futures:
            if not future.done():
                future.set_result(result)


@dataclass(frozen=True, slots=True)
class Job:
    """One piece of a lane's work: a turn (from the inbox when `item_id` is set), or the parts
    an earlier process left undelivered in this conversation."""

    request: TurnRequest | None
    item_id: int | None = None
    leftovers: tuple[OutboxPart, ...] = ()
    resumed: bool = False  # found pending at start: it may have run (and stopped) before
    trace: tracing.TurnTrace = field(default=tracing.NO_TURN, compare=False)  # opened at intake
    absorbed: Absorbed = field(default_factory=Absorbed, compare=False)  # filled as it runs

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
