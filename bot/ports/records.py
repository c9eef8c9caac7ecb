"""Turn records and usage: what a turn did and what it cost, and the stores that keep them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bot.turns import Outcome


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    # The part of `cache_write_tokens` written for the 1-hour lifetime (priced higher).
    cache_write_1h_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )

    @property
    def total(self) -> int:
        """Every token the call processed: input (cached or not) and output."""
        return (
            self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.output_tokens
        )


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What one turn did: the exact request as sent (secrets redacted), usage, timing, outcome."""

    turn_id: str
    conversation_key: str
    channel: str
    started_at: datetime
    finished_at: datetime
    outcome: Outcome
    request: Mapping[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


class TurnRecords(Protocol):
    async def save(self, record: TurnRecord) -> None: ...


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """What one turn cost, as the API reported it, for budgets and `bot usage`.

    `surface` is where it happened (`slack:C123`, or the conversation key for console and
    request-driven turns); `person` the host-side speaker id (never shown to the model).
    """

    turn_id: str
    at: datetime
    channel: str
    surface: str
    person: str | None
    model: str
    usage: Usage
    cost_usd: float


@dataclass(frozen=True, slots=True)
class Spent:
    tokens: int = 0
    cost_usd: float = 0.0


class UsageLedger(Protocol):
    """Durable per-turn usage: summed for budgets, reported by `bot usage`."""

    async def add(self, entry: UsageEntry) -> None: ...

    async def spent(
        self, since: datetime, *, surface: str | None = None, person: str | None = None
    ) -> Spent:
        """Tokens and money spent since `since`, over everything or one surface / person."""

    async def first_notice(self, scope: str, period: str) -> bool:
        """Mark a budget notice as sent; True only the first time for (scope, period)."""


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """One line of `bot turns list`."""

    turn_id: str
    conversation_key: str
    started_at: datetime
    outcome: str
    latency_ms: float
    input_tokens: int
    output_tokens: int
