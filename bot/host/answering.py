"""Showing a turn's answer: its live preview, the progress sign, and its parts for the outbox.

Kept in one module (with `Job.live`, which the stream fills and the parts read) so the way an
answer reaches a platform can change in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import structlog

from bot.delivery import Delivery
from bot.host.job import Job
from bot.inbox import Outbox, OutboxPart
from bot.ports.delivery import DeliveryReport
from bot.streaming import AnswerStream
from bot.turns import ConversationKind, ReplyRoute, TurnRequest

log = structlog.get_logger(__name__)


@runtime_checkable
class StreamingDeliverer(Protocol):
    """A deliverer that can show text as it arrives (the console)."""

    async def stream(self, route: ReplyRoute, delta: str) -> None: ...


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
        outbox = self._outbox

        async def record(index: int, platform_id: str) -> None:
            job.live[index] = platform_id
            try:
                await outbox.opened(request.turn_id, index, platform_id)
            except Exception as exc:  # kept in memory: this run still finishes, not reposts
                log.warning("stream_record_failed", error=type(exc).__name__)

        return self._delivery.stream(request.turn_id, request.route, record)

    def streamer(self, request: TurnRequest) -> Callable[[str], Awaitable[None]] | None:
        route = request.route
        deliverer = self._delivery.deliverer(route.platform) if route else None
        if route is None or not isinstance(deliverer, StreamingDeliverer):
            return None
        streaming: StreamingDeliverer = deliverer

        async def on_text(delta: str) -> None:
            await streaming.stream(route, delta)

        return on_text

    @contextlib.asynccontextmanager
    async def working(self, route: ReplyRoute | None) -> AsyncIterator[None]:
        deliverer = self._delivery.deliverer(route.platform) if route else None
        if route is None or deliverer is None:
            yield
            return
        async with deliverer.working(route):
            yield

    async def parts(self, job: Job, request: TurnRequest, say: str) -> list[OutboxPart]:
        """The outbox parts of what the turn says, over the messages its stream opened."""
        return await self._delivery.parts(
            request.turn_id,
            request.conversation_key,
            request.route,
            say,
            job.live,
            resumed=job.resumed,
        )

    async def send(
        self, job: Job, request: TurnRequest, say: str, parts: Sequence[OutboxPart]
    ) -> DeliveryReport | None:
        """Post a published answer (a turn that ran before looks for its parts first)."""
        return await self._delivery.send(request.route, say, parts, reconcile=job.resumed)
