"""Showing a turn's answer: its live preview, the progress sign, and its parts for the outbox.

The stream records each message it opens in the outbox as soon as the platform names it (a run
again after a crash finishes them instead of posting again) and returns them when it closes; the
conclusion carries them to the publisher, which makes the answer's parts over them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace

import structlog

from bot.host.delivery import Delivery
from bot.host.job import Job
from bot.host.streaming import AnswerStream
from bot.ports.delivery import DeliveryReport
from bot.ports.outbox import Outbox, OutboxPart
from bot.turns import ConversationKind, ReplyRoute, TurnRequest

log = structlog.get_logger(__name__)


class Answering:
    """The host's side of delivery for one turn's answer."""

    def __init__(self, delivery: Delivery, outbox: Outbox) -> None:
        self._delivery = delivery
        self._outbox = outbox

    def stream(self, job: Job, request: TurnRequest) -> AnswerStream | None:
        """A live preview of the answer, for a conversation turn's first run (a run again after
        a crash shows nothing until its answer is whole: delivery then finishes or replaces
        what the first run showed). Request-driven turns never stream: their answer may be the
        silent token."""
        if job.resumed or request.kind is ConversationKind.REQUEST:
            return None
        return self._delivery.stream(request.turn_id, request.route)

    @contextlib.asynccontextmanager
    async def working(self, route: ReplyRoute | None) -> AsyncIterator[None]:
        deliverer = self._delivery.deliverer(route.platform) if route else None
        if route is None or deliverer is None:
            yield
            return
        async with deliverer.working(route):
            yield

    def privately(self, request: TurnRequest, public: str | None) -> TurnRequest | None:
        """The request with its route changed so what is said reaches only its person, where
        the platform can; None where it cannot (see `Deliverer.private`)."""
        route = request.route
        deliverer = self._delivery.deliverer(route.platform) if route else None
        if route is None or deliverer is None:
            return None
        hidden = deliverer.private(route, public)
        return replace(request, route=hidden) if hidden is not None else None

    async def parts(
        self, job: Job, request: TurnRequest, say: str, opened: Mapping[int, str]
    ) -> list[OutboxPart]:
        """The outbox parts of what the turn says, over the messages its stream `opened`."""
        return await self._delivery.parts(
            request.turn_id,
            request.conversation_key,
            request.route,
            say,
            opened,
            resumed=job.resumed,
        )

    async def send(
        self, job: Job, request: TurnRequest, parts: Sequence[OutboxPart]
    ) -> DeliveryReport | None:
        """Post a published answer (a turn that ran before looks for its parts first)."""
        return await self._delivery.send(request.route, parts, reconcile=job.resumed)
