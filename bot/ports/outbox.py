"""The outbox (SPEC §11): an answer's parts, the publication that ends a turn in one
transaction, and the inbox item's end state it writes.

Exactly once, end to end, rests on the inbox (`bot.ports.intake`), the outbox and delivery:

- **Outbox.** The parts of an answer are written by `Outbox.publish` in the same transaction that
  publishes the turn's history, closes its inbox item and saves its turn record (a `Publication`),
  so history, outbox and inbox never disagree.
- **Delivery.** A `Deliverer` posts parts one by one and returns the platform's id for each,
  which `Outbox.delivered` records; on start every undelivered part is posted (after `find` has
  looked for it on the platform, where the platform can say).
- **Streaming.** A message a stream opens on the platform while the model writes (SPEC §7) is
  recorded with `Outbox.opened` as soon as the platform names it; the publication's parts take
  those ids, and delivery *finishes* such a part (the platform's message is made to show exactly
  the part's text) instead of posting it again. A message a stream opened that the final answer
  does not need becomes a part with no text, which delivery removes. So a turn that runs again
  after a crash reuses what its first run showed, and never shows the answer twice.

The engines implement it in `bot.store.sql.inbox` (`SqlOutbox`); `bot.testing` in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.ports.memory import MemoryCapture
from bot.ports.records import TurnRecord, UsageEntry
from bot.turns import HistoryEntry, ReplyRoute


class InboxState(StrEnum):
    PENDING = "pending"  # accepted; its turn has not ended (or ended without a publication)
    ANSWERED = "answered"  # the turn published an answer
    SILENT = "silent"  # a request-driven turn answered with the silent token
    REFUSED = "refused"  # busy, too fast, unknown skill, too large: a short notice, no model call
    FAILED = "failed"  # the model runtime gave up: continuity account and an apology
    CRASHED = "crashed"  # the host failed unexpectedly: continuity account and an apology
    STOPPED = "stopped"  # a person stopped the turn: continuity account and a stop note
    CONSUMED = "consumed"  # taken into another turn (steered or collected): `consumed_by` it


TERMINAL_STATES = frozenset(InboxState) - {InboxState.PENDING}


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
    undone alone and logged: it never fails the publication). `consumed`: the items of the
    messages the turn took in beside its own (SPEC §19), ended as consumed by `record`'s turn
    in the same transaction, so each message is part of exactly one published turn."""

    conversation_key: str
    entries: Sequence[HistoryEntry] = ()
    replace: bool = False
    parts: Sequence[OutboxPart] = ()
    item_id: int | None = None
    state: InboxState | None = None
    record: TurnRecord | None = None
    usage: UsageEntry | None = None
    capture: MemoryCapture | None = None
    consumed: Sequence[int] = ()


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
