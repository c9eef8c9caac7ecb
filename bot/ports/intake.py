"""Intake: what a channel is, and the sink it hands turns to (admission, results)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.ports.attachments import FileSource
from bot.ports.delivery import Deliverer, DeliveryReport
from bot.ports.history import Chatter
from bot.turns import Continuation, Outcome, TurnRequest


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
        commands `/memory`, `/forget`, `/usage`): no model call, nothing in history."""


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
