"""Intake: what a channel is, the sink it hands turns to (admission, results), and the durable
inbox behind it (SPEC §11).

- **Inbox.** A platform event is acknowledged only after `Inbox.accept` has written, in one
  transaction, its dedupe marks and (when none of them was seen before) the TurnRequest with its
  route as a pending item. A write that fails raises, and the channel does not acknowledge, so the
  platform redelivers. An item leaves `pending` only for a terminal state (`bot.ports.outbox`);
  on start every pending item runs again.
- **Sharing.** Where several replicas share one store (PostgreSQL), a `WorkShare` says which
  replica runs which conversation: one at a time, in the order its items were accepted, and what
  a replica that is gone left (items and parts) is adopted by a live one while it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from bot.ports.attachments import FileSource
from bot.ports.delivery import Deliverer, DeliveryReport
from bot.ports.history import Chatter
from bot.ports.outbox import OutboxPart
from bot.turns import Continuation, Lookups, Names, Outcome, TurnRequest


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

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        """Record the marks of an event that starts no turn, and buffer its `chatter` (a group
        message kept as context) with them in one transaction; True the first time. Raises
        IntakeUnavailable when it cannot (then do not acknowledge: neither was written)."""

    async def run(self, request: TurnRequest) -> TurnResult:
        """Queue the turn and wait until it is published and delivered (console, cron)."""

    async def cancel(self, conversation_key: str) -> bool:
        """A person stopped the conversation's running turn (Slack's stop button, Ctrl-C): its
        model call is abandoned and the conversation keeps a continuity account. False when no
        turn of that conversation is running."""

    async def command(self, request: TurnRequest) -> str:
        """The private reply to a host command sent beside the conversation (Slack's slash
        commands `/memory`, `/forget`, `/usage`, `/schedules`): no model call, nothing in
        history."""


class Channel(Protocol):
    """One platform's way in (events to the sink) and out (its deliverer)."""

    @property
    def name(self) -> str: ...

    @property
    def deliverer(self) -> Deliverer: ...

    @property
    def files(self) -> FileSource | None:
        """The platform's downloader for shared files; None when it has none."""

    @property
    def connected(self) -> bool:
        """For /healthz: whether the channel is taking events (or standing by, healthy)."""

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        """Connect. With `intake` false, only get ready to deliver (`bot cron run` beside a
        running host must not take its events: no socket, no polling, no webhook change)."""

    async def stop(self) -> None: ...


class Resumer(Protocol):
    """Continues one kind of suspended turn, inside its conversation's lane."""

    async def resume(self, request: TurnRequest, continuation: Continuation) -> str:
        """Do what the suspended turn waited for (at most once) and return what the model reads
        next: a host-written note with the outcome. Never raises for an expected outcome."""


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One accepted event waiting for (or running) its turn. `attempts` counts started turns."""

    item_id: int
    request: TurnRequest
    attempts: int = 0


class Inbox(Protocol):
    async def accept(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> InboxItem | None:
        """In one transaction: record every mark under `source` and, when none was seen before,
        store `request` (route included) as a pending item and empty the conversation's chat
        buffer up to id `consumes` (the request's preceding messages came from it). None for a
        redelivery. Raises when it cannot write (store closed, disk full): then nothing is
        recorded and nothing emptied."""

    async def note(
        self, *, source: str, marks: Sequence[str], chatter: Chatter | None = None
    ) -> bool:
        """Record the marks of an event that starts no turn; True when none was seen before.
        `chatter` (a group message kept as context) is appended to its chat buffer in the same
        transaction, only when the marks are new: a redelivery is not buffered twice, and a
        write that fails (it raises) records neither."""

    async def claim(self, item_id: int) -> int:
        """Count one more started turn for the item; returns the count (1 on the first run)."""

    async def pending(self) -> list[InboxItem]:
        """Every item not yet in a terminal state, in the order they were accepted."""


@dataclass(frozen=True, slots=True)
class Adopted:
    """The work of one conversation a replica has just taken on: the parts a gone replica left
    undelivered (to post first), then the items in the order they were accepted. `resumed` names
    the items a gone replica had claimed (they may have started running there)."""

    parts: tuple[OutboxPart, ...] = ()
    items: tuple[InboxItem, ...] = ()
    resumed: frozenset[int] = frozenset()


class WorkShare(Protocol):
    """How replicas on one shared store divide the inbox (SPEC §13). An accepted item is nobody's
    until a replica adopts its conversation; a conversation is adopted by one live replica at a
    time, whole (every pending item and undelivered part of it), and stays that replica's until
    all of it is finished, so its turns run on one replica, one at a time, in accepted order."""

    async def adopt(self, conversation_key: str) -> Adopted:
        """Take on the conversation's unowned work, unless a live replica other than this one
        owns some of it (then nothing: that replica takes the rest when it is done)."""

    async def orphaned(self, limit: int) -> list[str]:
        """Conversations with work that no live replica owns (accepted and never adopted, or
        left by a replica that is gone), oldest first; at most `limit`."""


@runtime_checkable
class RequestCompleter(Protocol):
    """A channel whose stored requests leave names for their turn to look up (Slack looks them
    up then, not before the ack): when the turn starts, the host hands it the request's
    `Lookups` and applies the `Names` it answers."""

    async def look_up(self, lookups: Lookups) -> Names:
        """The names behind `lookups`; degrades (an unknown person is "someone") rather than
        fails."""
