"""The small protocols the core depends on, and the values that cross them.

The host is wired only to these: stores (history, memory, turn records, chat buffer; the inbox
and outbox are in `bot.inbox`), the model runtime, tools and the channels' deliverers. Each has
one production implementation (`bot.store`, `bot.model`, `channels.*`) and, where tests need
one, an in-memory double in `bot.memstore`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from bot.turns import Attached, HistoryEntry, Outcome, PrecedingMessage, ReplyRoute, TurnRequest

# --- stores -------------------------------------------------------------------------------------


class HistoryStore(Protocol):
    async def load(self, key: str) -> list[HistoryEntry]:
        """The conversation's stored entries, oldest first; [] for a new or unreadable one."""

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        """Append `entries` (or, with `replace`, make them the whole history) atomically."""

    async def reset(self, key: str) -> bool:
        """Forget one conversation; True when there was something to forget."""

    async def conversations(self) -> list[str]:
        """Every stored conversation key, most recently active first."""


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
    """One recalled memory. `said` is the speaker's own words inside `text` ("" when unknown)."""

    id: str
    text: str
    surface: str
    score: float
    captured_at: datetime
    said: str = ""


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


@dataclass(frozen=True, slots=True)
class OwnMemory:
    """One memory as its speaker sees it in `/memory`: their own words, when they said them."""

    id: str
    said: str
    captured_at: datetime


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
    `bot.store.rules` holds the engine-neutral parts (relevance gate, hold-back, bounds)."""

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
class Buffered:
    """What a chat buffer holds now, oldest first; `upto` is the newest row's id (None: empty).
    A turn that uses them passes `upto` to `TurnSink.submit`, which empties the buffer up to it
    in the transaction that stores the turn, so they are neither lost nor used twice."""

    messages: tuple[PrecedingMessage, ...] = ()
    upto: int | None = None


class ChatBuffer(Protocol):
    """A bounded, durable per-chat buffer of messages that started no turn (Telegram groups)."""

    async def append(self, key: str, message: PrecedingMessage) -> None: ...

    async def peek(self, key: str) -> Buffered:
        """Everything buffered for `key`, oldest first, without emptying it (a read: it works
        while the store cannot write)."""

    async def take(self, key: str) -> list[PrecedingMessage]:
        """Everything buffered for `key` since the last take, oldest first; empties the buffer."""


class Leadership(Protocol):
    """One holder at a time, among every replica on a shared store, of a named duty that must
    not run twice (Telegram long polling). Held until released, or until the holder dies."""

    async def acquire(self, duty: str) -> None:
        """Wait until this process holds `duty` (another replica's death hands it over)."""

    async def release(self, duty: str) -> None: ...


# --- delivery -----------------------------------------------------------------------------------


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


# --- intake -------------------------------------------------------------------------------------


class Admission(StrEnum):
    ACCEPTED = "accepted"  # stored in the inbox; its turn will run
    DUPLICATE = "duplicate"  # a redelivery of an event already stored
    BUSY = "busy"  # stored, then refused: the conversation's queue is full
    RATE_LIMITED = "rate_limited"  # stored, then refused: the person is over the turn rate
    CLOSED = "closed"  # not stored: the host is shutting down
    UNAVAILABLE = "unavailable"  # not stored: the store cannot write (closed, disk full)

    @property
    def acknowledge(self) -> bool:
        """Whether the channel may acknowledge the event: only once it is durably stored (or
        known from before). Otherwise the platform must redeliver it."""
        return self not in (Admission.CLOSED, Admission.UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How one turn ended, for callers that wait for it (console, cron, webhooks)."""

    turn_id: str
    outcome: Outcome
    text: str = ""
    delivery: DeliveryReport | None = None
    error: str | None = None


class TurnSink(Protocol):
    """What a channel hands its TurnRequests to (the host)."""

    async def submit(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> Admission:
        """Store the turn in the durable inbox, deduplicated by the event's `marks` (its ids
        under `source`), and queue it; return at once. Push channels acknowledge the event to
        the platform only when `admission.acknowledge` is true. `consumes`: the conversation's
        chat buffer up to this id (`Buffered.upto`) is emptied in the same transaction."""

    async def note(self, *, source: str, marks: Sequence[str]) -> bool:
        """Record the marks of an event that starts no turn; True the first time. Raises
        IntakeUnavailable when it cannot (then do not acknowledge)."""

    async def run(self, request: TurnRequest) -> TurnResult:
        """Queue the turn and wait until it is published and delivered (console, cron)."""


class Channel(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def deliverer(self) -> Deliverer: ...

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        """Connect. With `intake` false, only get ready to deliver (`bot cron run` beside a
        running host must not take its events: no socket, no polling, no webhook change)."""

    async def stop(self) -> None: ...


# --- attachments --------------------------------------------------------------------------------


class FileSource(Protocol):
    """A channel's downloader: attachment `index` (0-based) of the message behind `route`."""

    async def fetch(self, route: ReplyRoute, index: int, max_bytes: int) -> bytes:
        """The file's bytes, at most `max_bytes` (FileRefused("too_large") past that)."""


@dataclass(frozen=True, slots=True)
class StoredAttachment:
    content_id: str
    media_type: str
    data: bytes


class AttachmentStore(Protocol):
    """Attachments kept once by content id, visible to the conversations that shared them."""

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None: ...

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of those of `content_ids` that conversation `key` shared."""

    async def find(self, key: str, prefix: str) -> StoredAttachment | None:
        """The one attachment of conversation `key` whose content id starts with `prefix`."""


class AttachmentReader(Protocol):
    """Reads a turn's attachments (`bot.attachments.AttachmentIntake`)."""

    async def take(self, request: TurnRequest, history: Sequence[HistoryEntry]) -> Attached:
        """This turn's blocks, the bytes to replay (this turn's and history's), problem lines."""


# --- model --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        """Run the tool; raise ToolError (or anything) for an error result."""


@dataclass(frozen=True, slots=True)
class BudgetFacts:
    """What the token budget decided for one assembled request, as the turn record keeps it."""

    estimated_tokens: int
    history_used: int
    floor_unmet: bool = False

    def details(self) -> dict[str, object]:
        return {
            "floor_unmet": self.floor_unmet,
            "estimated_tokens": self.estimated_tokens,
            "history_used": self.history_used,
        }


@dataclass(frozen=True, slots=True)
class AssembledRequest:
    """A Messages API request body, ready to send, plus what the budget decided."""

    body: Mapping[str, Any]
    estimated_tokens: int
    history_used: int
    floor_unmet: bool = False

    @property
    def budget(self) -> BudgetFacts:
        return BudgetFacts(self.estimated_tokens, self.history_used, self.floor_unmet)


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
    set, is a compacted replacement for the history the plan carried. `budget` is what the
    budget decided for the last request assembled (None when none was, as for `/compact`).
    """

    text: str
    entries: Sequence[HistoryEntry]
    history: Sequence[HistoryEntry] | None = None
    request: Mapping[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    budget: BudgetFacts | None = None


class ModelRuntime(Protocol):
    async def run(self, plan: TurnPlan) -> TurnOutcome:
        """Call the model (with tool rounds and compaction); raise TurnFailed when it gives up."""

    async def aclose(self) -> None: ...


# --- scheduled runs -----------------------------------------------------------------------------
# The record one cron or webhook run leaves. Its port (`channels.cron.CronRuns`) lives with the
# scheduler; the value lives here so the SQLite implementation in bot.store can speak it too.


class CronRunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"  # the turn finished; posted (when the run notifies) or kept in history only
    SILENT = "silent"  # the agent answered with the silent token: nothing posted
    UNDELIVERED = "undelivered"  # the turn finished but the platform did not take every part
    FAILED = "failed"  # the turn did not finish, or the host refused it
    INTERRUPTED = "interrupted"  # the process stopped while the run was in flight


class CronTrigger(StrEnum):
    SCHEDULE = "schedule"
    CATCH_UP = "catch_up"  # a slot missed while down or busy, run late within the grace
    RETRY = "retry"  # the turn again after a failure
    REDELIVERY = "redelivery"  # the same answer posted again after nothing was accepted
    MANUAL = "manual"  # `bot cron run NAME`
    WEBHOOK = "webhook"


@dataclass(frozen=True, slots=True)
class CronRun:
    """One attempt of a job (or webhook call). `scheduled_for` is the schedule slot it serves
    (None for manual and webhook runs); `parts`/`accepted` count the answer's messages and how
    many the platform took; `delivered` is true only when it took every one."""

    run_id: str
    job: str
    trigger: CronTrigger
    fired_at: datetime
    status: CronRunStatus = CronRunStatus.RUNNING
    attempt: int = 1
    scheduled_for: datetime | None = None
    finished_at: datetime | None = None
    delivered: bool = False
    parts: int = 0
    accepted: int = 0
    error: str | None = None
