"""Delivery: a channel's way back to the platform (`Deliverer`), its live messages, and reports.

Every platform delivers the same way: `bot.host.delivery` renders an answer into parts with
`render`, stores them in the outbox, then posts each with `post` (looking for it first with `find`
after a restart) and marks it delivered with the id the platform gave it. A platform that can show
an answer while it is written returns a `LiveSession` from `live`; the messages a session opened are
then `finish`ed with their final parts rather than posted again. `Deliverer` is a base class, not a
protocol, so a platform that leaves out what delivery needs fails the type check.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal

from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """Honest delivery status: `delivered` only when the platform accepted every part."""

    parts: int
    accepted: int
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.error is None and self.accepted == self.parts


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call as a live answer shows it while the agent works: the call's id, the tool's
    name (never its arguments: they may hold what the person shared) and how it stands."""

    id: str
    title: str
    status: Literal["in_progress", "complete", "error"]


@dataclass(frozen=True, slots=True)
class LiveView:
    """What one live message should show now: `formatted` is the part as the deliverer renders
    the answer so far; `markdown` is the model's text since the message opened (what a platform
    that appends Markdown itself, Slack's native streams, is sent)."""

    formatted: str
    markdown: str


class LiveSession(ABC):
    """One turn's live messages on one route, as the platform can show them (`bot.host.streaming`
    drives it). Each method raises StreamRefused when the platform will not stream (nothing
    more is tried) and StreamBusy when rate-limited; other errors skip one update."""

    @property
    @abstractmethod
    def interval(self) -> float:
        """Seconds between two updates of one message (the platform's rate for this chat)."""

    @abstractmethod
    async def open(self, index: int, first: str | None, view: LiveView) -> str | None:
        """Show message `index` (`first`: the platform id of message 0, once there is one);
        its platform id, or None where the platform keeps no message yet (a draft)."""

    @abstractmethod
    async def show(self, index: int, platform_id: str | None, view: LiveView) -> None:
        """Update message `index` to `view`."""

    @abstractmethod
    async def seal(self, index: int, platform_id: str | None, view: LiveView) -> str | None:
        """Message `index` is full (the answer goes on in the next): stop streaming it; its
        platform id (a draft becomes a message here), or None when it has none."""

    async def steps(
        self, index: int, platform_id: str | None, first: str | None, steps: Sequence[Step]
    ) -> str | None:
        """Show how the turn's tool calls stand, in message `index` (opened for them when
        `platform_id` is None; `first`: message 0's id). Its platform id; None where this session
        shows no steps (the default: the answer's text alone)."""
        return None

    async def ended(self, index: int, platform_id: str | None, view: LiveView) -> None:
        """The model is done: `view` is all it wrote into message `index`, the last one open
        (updates are rate-limited, so the last ones may not have been shown). Delivery finishes
        the message next; a platform that can edit it then needs nothing here (the default)."""
        return None


class Deliverer(ABC):
    """A channel's way back to the platform; the only reader of a ReplyRoute's values."""

    @abstractmethod
    def render(self, route: ReplyRoute, text: str) -> list[str]:
        """The answer formatted and split into the parts that will be posted, in order."""

    @abstractmethod
    async def post(self, part: OutboxPart, first: str | None) -> str:
        """Post one part (after retries on rate limits); the platform's id for it. `first` is
        the platform id of part 0 once it is posted (a Slack answer continues in its thread).
        Raises PartFailed when the platform refuses it for good, PartDelayed (or any other
        error) when it may take it later."""

    @abstractmethod
    def route_to(self, destination: str) -> ReplyRoute:
        """A top-level route to a destination id (a Slack channel id, a Telegram chat id)."""

    async def find(self, part: OutboxPart, first: str | None) -> str | None:
        """Look on the platform for a post of this part that went through before a restart;
        its platform id, or None. The default: the platform offers no way to look."""
        return None

    def live(self, route: ReplyRoute, turn_id: str) -> LiveSession | None:
        """A session showing one turn's answer on `route` while it is written; None when this
        route does not stream (the default: answers are posted whole)."""
        return None

    async def finish(self, part: OutboxPart, first: str | None) -> str:
        """Make the message a stream opened or `find` found (`part.platform_id`) show exactly
        `part.text` and end its streaming; a part with no text is removed. Its platform id.
        Raises PartFailed when the platform refuses for good. The default, for a platform that
        neither streams nor edits: the message found is the part, as posted."""
        assert part.platform_id is not None, "only a part with a platform id is finished"
        return part.platform_id

    def private(self, route: ReplyRoute, public: str | None) -> ReplyRoute | None:
        """The route for a reply meant only for the request's person (`/usage`, `/memory`, a
        refusal), where the platform can show it to them alone; `public` (Markdown; None: the
        reply itself) is what the chat may see if, at delivery, it cannot. None when this route
        offers no such thing (the default): the caller says what it would say in the open."""
        return None

    def working(self, route: ReplyRoute) -> AbstractAsyncContextManager[None]:
        """Show a progress sign (reaction, typing...) for as long as the context is open. The
        default shows none."""
        return contextlib.nullcontext()

    async def post_text(self, route: ReplyRoute, text: str, *, notice_id: str) -> DeliveryReport:
        """Post a notice that no turn owns (cron's pause line, a cron answer posted again):
        rendered and posted part by part with `post`, in order, until one is not taken. It
        bypasses the outbox, so it is not exactly-once; a turn's answer never comes this way.
        `notice_id` names the parts (`<notice_id>.<index>`)."""
        texts = self.render(route, text) if text.strip() else []
        first: str | None = None
        for index, body in enumerate(texts):
            part = OutboxPart(f"{notice_id}.{index}", notice_id, "", index, route, body)
            try:
                platform_id = await self.post(part, first)
            except Exception as exc:  # a report, never a raise: the caller says what it means
                return DeliveryReport(len(texts), index, str(exc) or type(exc).__name__)
            first = platform_id if index == 0 else first
        return DeliveryReport(len(texts), len(texts))
