"""Approvals (SPEC §14): the durable request, the card a channel shows, and a press on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from bot.turns import ReplyRoute

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Approval:
    """One tool call waiting for (or decided by) a person.

    `arguments` is the canonical JSON that was shown and that runs; `digest` its sha256, checked
    again before the call. `requester` and `approvers` are `platform:person` ids. `request` is
    the encoded turn request the continuation answers; `card` where the channel posted the card.
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
    request: str
    created_at: float
    expires_at: float
    card: dict[str, Any] = field(default_factory=dict)
    state: str = PENDING
    decided_by: str | None = None
    decided_at: float | None = None
    result: str | None = None
    running_at: float | None = None


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

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        """Replace the card at `where` with `text`, its buttons gone, and take the waiting sign
        down. Closing a card twice is harmless."""


@dataclass(frozen=True, slots=True)
class PressAnswer:
    """What the channel tells the person who pressed: privately, and whether anything changed."""

    text: str
    changed: bool


class PressDesk(Protocol):
    """The host's side: a press on a card's button, from `presser` (`platform:person`)."""

    async def press(self, approval_id: str, approve: bool, presser: str) -> PressAnswer: ...
