"""Approvals (SPEC §14): the durable request, the card a channel shows, and a press on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from bot.turns import ReplyRoute, TurnRequest

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Approval:
    """One tool call waiting for (or decided by) a person.

    `arguments` is the canonical JSON that was shown and that runs; `digest` its sha256, checked
    again before the call. `requester` and `approvers` are `platform:person` ids. `request` is
    the turn request the continuation answers; `card` where the channel posted the card.
    `running_at` is set (once, conditionally) just before an approved call runs, and `result` is
    the outcome the continuation told the model ("" for a call that did not run): None until then.
    """

    id: str
    turn_id: str
    conversation_key: str
    tool: str
    arguments: str
    digest: str
    requester: str
    approvers: tuple[str, ...]
    request: TurnRequest
    created_at: float
    expires_at: float
    card: dict[str, Any] = field(default_factory=dict)
    state: str = PENDING
    decided_by: str | None = None
    decided_at: float | None = None
    result: str | None = None
    running_at: float | None = None


class ApprovalRecords(Protocol):
    """The durable approval requests a store keeps: a decision and an outcome are each taken
    once (on a shared store the first replica wins)."""

    async def add(self, approval: Approval) -> None: ...

    async def get(self, approval_id: str) -> Approval | None: ...

    async def shown(self, turn_id: str, tool: str, digest: str) -> Approval | None:
        """The request whose card turn `turn_id` already showed for this call, if any."""

    async def counts(self, turn_id: str, conversation_key: str) -> tuple[int, int]:
        """How many requests turn `turn_id` made (in any state), and how many are still pending
        in conversation `conversation_key`."""

    async def set_card(self, approval_id: str, card: dict[str, Any]) -> None: ...

    async def decide(self, approval_id: str, state: str, by: str, at: float) -> bool:
        """Move a pending request to `state`; False when it was no longer pending."""

    async def start(self, approval_id: str, at: float) -> bool:
        """Mark an approved request's call as running, once: False when it was marked before
        (a run of its continuation stopped during the call) or its outcome is kept already."""

    async def finish(self, approval_id: str, result: str) -> bool:
        """Keep the outcome of a decided request unless one is kept already (False then: its
        continuation is someone else's)."""

    async def unfinished(self, since: float) -> list[Approval]:
        """Requests decided since `since` whose continuation has not kept an outcome yet."""

    async def due(self, now: float) -> list[Approval]:
        """Pending requests whose time is up."""

    async def listing(self, *, pending: bool = False, limit: int = 100) -> list[Approval]:
        """The newest requests first (only the pending ones with `pending`)."""


@dataclass(frozen=True, slots=True)
class Card:
    """What a card shows: every text already bounded and neutralized by the host."""

    approval_id: str
    tool: str
    arguments: str
    requester: str
    text: str  # the whole card as one plain text, for platforms without blocks
    approve_label: str
    deny_label: str
    # For a card sent to the approvers privately (`[approvals] where = "approver"`): the one line
    # left in the conversation, and the card without its arguments, for a conversation where an
    # approver cannot be reached privately.
    notice: str = ""
    hidden_text: str = ""


@runtime_checkable
class ApprovalCards(Protocol):
    """A channel's side: post a card with its two buttons, and later replace it with a verdict;
    presses on the buttons go to the desk it is given. Where the platform has a lasting sign on
    a message, the conversation shows that it waits from `post_card` until `close_card`."""

    name: str

    def use_approvals(self, desk: PressDesk) -> None: ...

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        """Post `card` through `route` (and show the waiting sign); where it went (the channel's
        own values, stored with the request), to close it from any replica."""

    async def post_private(
        self, route: ReplyRoute, card: Card, approvers: Sequence[str]
    ) -> dict[str, Any]:
        """Send `card` privately to each of `approvers` (`platform:person` ids) and leave
        `card.notice` in the conversation (with the waiting sign); where no approver can be
        reached privately, the conversation gets the card with `card.hidden_text` (no arguments)
        instead. Where it all went, as `post_card` says."""

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        """Replace the card at `where` with `text`, its buttons gone, and take the waiting sign
        down (a private card, its private copies and the line left in the conversation alike).
        Closing a card twice is harmless."""


@dataclass(frozen=True, slots=True)
class PressAnswer:
    """What the channel tells the person who pressed: privately, and whether anything changed."""

    text: str
    changed: bool


class PressDesk(Protocol):
    """The host's side: a press on a card's button, from `presser` (`platform:person`)."""

    async def press(self, approval_id: str, approve: bool, presser: str) -> PressAnswer: ...
