"""The model runtime: the plan the host hands it for one turn, and what comes back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.ports.records import Usage
from bot.ports.tools import Tool
from bot.turns import HistoryEntry


@dataclass(frozen=True, slots=True)
class AssembledRequest:
    """A Messages API request body, ready to send, plus what the budget decided."""

    body: Mapping[str, Any]
    estimated_tokens: int
    history_used: int
    floor_unmet: bool = False


class Assemble(Protocol):
    """Build the request for this turn over a given history (the runtime re-runs it after
    compaction)."""

    def __call__(self, history: Sequence[HistoryEntry], /) -> AssembledRequest: ...


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """What the host hands the model runtime for one turn."""

    turn_id: str
    conversation_key: str
    history: Sequence[HistoryEntry]
    assemble: Assemble
    tools: Sequence[Tool] = ()
    compact_only: bool = False  # `/compact`: summarize history, call nothing else
    on_text: Callable[[str], Awaitable[None]] | None = None  # streamed text deltas


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What the model runtime produced.

    `entries` are this turn's new assistant/tool entries (not the user message). `history`, when
    set, is a compacted replacement for the history the plan carried.
    """

    text: str
    entries: Sequence[HistoryEntry]
    history: Sequence[HistoryEntry] | None = None
    request: Mapping[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1


class TurnFailed(Exception):
    """The model runtime gave up on a turn; carries whatever finished before it did."""

    def __init__(
        self,
        message: str,
        *,
        partial_text: str = "",
        entries: Sequence[HistoryEntry] = (),
        reply: str | None = None,
        attempts: int = 0,
        request: Mapping[str, Any] | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message)
        self.partial_text = partial_text
        self.entries = entries
        self.reply = reply  # what the person should be told, when not the default
        self.attempts = attempts
        self.request = request
        self.usage = usage or Usage()


class ModelRuntime(Protocol):
    async def run(self, plan: TurnPlan) -> TurnOutcome:
        """Call the model (with tool rounds and compaction); raise TurnFailed when it gives up."""

    async def aclose(self) -> None: ...
