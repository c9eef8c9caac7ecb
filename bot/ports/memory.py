"""Long-term memory: its store, what recall is scoped by and returns, and departures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.turns import Origin


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Who may hear what recall returns (SPEC §6).

    `surface` is where the turn happens (`slack:C123`, `telegram:-100`, or the conversation key for
    console and request-driven turns). `person` is the host-side identity of the speaker. In a
    `private` surface (a DM) recall may use what that person said anywhere and what was said in
    surfaces they took part in; elsewhere only what was captured in the same surface.
    """

    surface: str
    person: str | None = None
    private: bool = False
    # A console or request-driven turn, whose surface is its conversation key: it recalls only
    # that conversation's memories unless `memory.wide_console_recall` widens it to all.
    surfaceless: bool = False


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One recalled memory. `said` is the speaker's own words inside `text` ("" when unknown);
    `origin` where they came from, stamped at capture; `own` whether the person recall asked for
    said them (only their own words and the operator's read as true about them)."""

    id: str
    text: str
    surface: str
    score: float
    captured_at: datetime
    said: str = ""
    origin: Origin = Origin.UNLISTED
    own: bool = False
    answer_at: int = 0  # where the answer starts inside `text` (0: not known, an old entry)


@dataclass(frozen=True, slots=True)
class RequestHolds:
    """What this turn's request already carries, so recall does not repeat it (SPEC §6).

    `conversation_key` and `history_since`: the replayed history window of that conversation
    starts at `history_since`; a memory captured in that conversation at or after it is in the
    window and is held back (by its source turn's conversation and time, never by its words).
    `preceding`: the texts of this turn's preceding-messages fence; a memory whose speaker's words
    are already one of them (whitespace and case aside) is held back too.
    """

    conversation_key: str | None = None
    history_since: datetime | None = None
    preceding: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryCapture:
    """One successful exchange to remember, attributed to its speaker and its source turn."""

    conversation_key: str
    surface: str
    person: str | None
    speaker_label: str | None
    user_text: str
    answer: str
    at: datetime
    turn_id: str | None = None
    origin: Origin = Origin.UNLISTED  # stamped by the host from the request, never from the text


@dataclass(frozen=True, slots=True)
class OwnMemory:
    """One memory as its speaker sees it in `/memory`: their own words, when they said them,
    and where the host says they came from."""

    id: str
    said: str
    captured_at: datetime
    origin: Origin = Origin.UNLISTED


@dataclass(frozen=True, slots=True)
class Departure:
    """The platform says `person` left the surface `surface_id` of `channel` (a channel name such
    as "slack": the channel's own word, which the core never interprets)."""

    channel: str
    surface_id: str
    person: str
    at: datetime


class Departures(Protocol):
    """Where a channel reports that the platform says someone left a shared surface."""

    async def left(self, departure: Departure) -> None:
        """End the person's participation there; never raises (a failure is logged)."""


class MemoryStore(Protocol):
    """Long-term memory (SPEC §6). Every implementation (SQLite, PostgreSQL) keeps this contract;
    `bot.store.sql.rules` holds the engine-neutral parts (relevance gate, hold-back, bounds)."""

    async def recall(
        self, query: str, scope: MemoryScope, holds: RequestHolds | None = None
    ) -> list[MemoryHit]:
        """Best hits for `query` that `scope` may hear and `holds` does not already carry, gated
        for relevance at every store size, then bounded (memory.recall_hits, recall_max_bytes).

        In a private scope, what others said in a shared surface counts only within
        memory.participation_window of one of the person's own captured messages there, and not
        at all once `left` was called for that person and surface (until they speak there again).
        """

    async def capture(self, item: MemoryCapture) -> None:
        """Remember one exchange, with its source turn, and note that its person took part in
        its surface at `item.at` (the participation that private recall relies on)."""

    async def left(self, person: str, surface: str, at: datetime) -> None:
        """The person left `surface` at `at`: their participation there up to then ends, so their
        private recall no longer reaches what others said there. Their own words stay theirs."""

    async def own(self, person: str, scope: MemoryScope, limit: int) -> tuple[list[OwnMemory], int]:
        """The person's own memories visible in `scope` (everywhere in a private scope, else that
        surface), newest first, at most `limit` of them, and how many there are in all."""

    async def forget_own(
        self, person: str, scope: MemoryScope, ids: Sequence[str] | None = None
    ) -> int:
        """Delete those of `ids` (None: all) that are the person's own memories in `scope` (as
        `own` lists them); returns how many were deleted. Nobody else's memory is ever touched."""


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """One memory row as an operator sees it."""

    id: str
    conversation_key: str
    surface: str
    person: str | None
    text: str
    captured_at: datetime
    origin: Origin = Origin.UNLISTED
