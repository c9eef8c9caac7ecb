"""The durable inbox and outbox (SPEC §11): the ports a store engine implements, and their values.

Exactly once, end to end, rests on two tables and three promises:

- **Inbox.** A platform event is acknowledged only after `Inbox.accept` has written, in one
  transaction, its dedupe marks and (when none of them was seen before) the TurnRequest with its
  route as a pending item. A write that fails raises, and the channel does not acknowledge, so the
  platform redelivers. An item leaves `pending` only for a terminal state (answered, silent,
  refused, failed, crashed); on start every pending item runs again.
- **Outbox.** The parts of an answer are written by `Outbox.publish` in the same transaction that
  publishes the turn's history, closes its inbox item and saves its turn record (a `Publication`),
  so history, outbox and inbox never disagree.
- **Delivery.** Every channel's `Deliverer` (`bot.ports.delivery`) posts parts one by one and
  returns the platform's id for each, which `Outbox.delivered` records; on start every
  undelivered part is posted (after `find` has looked for it on the platform, where the
  platform can say).

- **Streaming.** A message a stream opens on the platform while the model writes (SPEC §7) is
  recorded with `Outbox.opened` as soon as the platform names it; the publication's parts take
  those ids, and delivery *finishes* such a part (the platform's message is made to show exactly
  the part's text) instead of posting it again. A message a stream opened that the final answer
  does not need becomes a part with no text, which delivery removes. So a turn that runs again
  after a crash reuses what its first run showed, and never shows the answer twice.

- **Sharing.** Where several replicas share one store (PostgreSQL), a `WorkShare` says which
  replica runs which conversation: one at a time, in the order its items were accepted, and what
  a replica that is gone left (items and parts) is adopted by a live one while it runs.

The SQLite implementation is `bot.store` (one process: no WorkShare); `bot.pgstore` implements all
three for replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from bot.ports.history import Chatter
from bot.ports.memory import MemoryCapture
from bot.ports.records import TurnRecord, UsageEntry
from bot.turns import HistoryEntry, Lookups, Names, ReplyRoute, TurnRequest


class InboxState(StrEnum):
    PENDING = "pending"  # accepted; its turn has not ended (or ended without a publication)
    ANSWERED = "answered"  # the turn published an answer
    SILENT = "silent"  # a request-driven turn answered with the silent token
    REFUSED = "refused"  # busy, too fast, unknown skill, too large: a short notice, no model call
    FAILED = "failed"  # the model runtime gave up: continuity account and an apology
    CRASHED = "crashed"  # the host failed unexpectedly: continuity account and an apology
    STOPPED = "stopped"  # a person stopped the turn: continuity account and a stop note


TERMINAL_STATES = frozenset(InboxState) - {InboxState.PENDING}


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
class OutboxPart:
    """One message of an answer, formatted and split as it will be posted.

    `part_id` (`<turn id>.<index>`) is also what the part carries on the platform where the
    platform can hold it (Slack message metadata), so a restart can find a post that went through.
    """

    part_id: str
    turn_id: str
    conversation_key: str
    index: int
    route: ReplyRoute
    text: str
    platform_id: str | None = None  # Slack ts, Telegram message_id; set once delivered


@dataclass(frozen=True, slots=True)
class Publication:
    """Everything one turn's end writes, in one transaction: history (appended, or replacing the
    whole history), the answer's parts, the inbox item's terminal state, the turn record, what
    the turn is charged and what long-term memory captures of it (a capture that fails is
    undone alone and logged: it never fails the publication)."""

    conversation_key: str
    entries: Sequence[HistoryEntry] = ()
    replace: bool = False
    parts: Sequence[OutboxPart] = ()
    item_id: int | None = None
    state: InboxState | None = None
    record: TurnRecord | None = None
    usage: UsageEntry | None = None
    capture: MemoryCapture | None = None


class Outbox(Protocol):
    async def publish(self, publication: Publication) -> None:
        """Write the publication atomically (see `Publication`)."""

    async def delivered(self, part_id: str, platform_id: str) -> None:
        """The platform accepted the part and named it `platform_id`."""

    async def abandon(self, part_id: str, error: str) -> None:
        """The platform refused the part for good; it is not posted again."""

    async def undelivered(self) -> list[OutboxPart]:
        """Parts neither delivered nor abandoned, oldest turn first, in part order."""

    async def parts(self, turn_id: str) -> list[OutboxPart]:
        """Every part of one turn, in order (delivered ones carry their platform id)."""

    async def opened(self, turn_id: str, index: int, platform_id: str) -> None:
        """A stream of the turn opened its message `index` on the platform as `platform_id`
        (before the turn's publication; kept until the publication takes it)."""

    async def streamed(self, turn_id: str) -> dict[int, str]:
        """The messages the turn's streams opened and no publication took yet: index -> id."""


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
