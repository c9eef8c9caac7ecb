"""Delivering answers through the channels' deliverers, from the outbox.

Every channel's `Deliverer` gets its answers as outbox parts: rendered before the publication
that stores them, then posted one by one, in order, each marked delivered with the platform's id
as soon as the platform took it. Parts left over by an earlier process are looked for on the
platform first (`find`), so a post that went through before a crash is marked, not posted again.

A deliverer whose route streams (`live`: Slack, Telegram, the console) shows answers while they are
written (`stream`, driven by `bot.host.streaming`): the messages a stream opened become the parts'
platform ids, and such a part is finished (`Deliverer.finish`) rather than posted, so the answer is
never shown twice.

A part the platform does not take for a passing reason (rate limits past the deliverer's own
waits, a timeout, a dropped connection) is tried again here, in-process, with backoff (never
sooner than a `PartDelayed`'s `retry_after`), until it is taken, refused for good, or the host
begins closing (then it stays in the outbox for the drain and the next start). So a finish that
Slack rate-limits six times still ends as the final answer, without a restart; the
conversation's later turns wait behind it, so order holds. A retry looks for the part on the
platform first (`find`), as after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import replace

import structlog

from bot import tracing
from bot.errors import PartDelayed, PartFailed
from bot.host.streaming import AnswerStream
from bot.ports.delivery import Deliverer, DeliveryReport
from bot.ports.outbox import Outbox, OutboxPart
from bot.turns import ReplyRoute

log = structlog.get_logger(__name__)

RETRY_FIRST = 0.5  # seconds before a part is tried again in-process; doubles each time
RETRY_MAX = 60.0


class Delivery:
    """The host's way out: one deliverer per platform, and the outbox behind them."""

    def __init__(
        self,
        outbox: Outbox,
        deliverers: Mapping[str, Deliverer],
        closing: asyncio.Event | None = None,
    ) -> None:
        self._outbox = outbox
        self._deliverers = dict(deliverers)
        # Set when the host begins closing: parts stop being retried in-process. Without one,
        # a part that fails for a passing reason is left in the outbox at once.
        self._closing = closing

    def deliverer(self, platform: str) -> Deliverer | None:
        return self._deliverers.get(platform)

    def stream(self, turn_id: str, route: ReplyRoute | None) -> AnswerStream | None:
        """A live preview of the answer on `route`, or None where the route does not stream.
        The messages it opens are recorded in the outbox as they open."""
        deliverer = self._deliverers.get(route.platform) if route else None
        if route is None or deliverer is None:
            return None
        session = deliverer.live(route, turn_id)
        if session is None:
            return None
        return AnswerStream(
            session, lambda text: deliverer.render(route, text), self._outbox, turn_id
        )

    async def parts(
        self,
        turn_id: str,
        key: str,
        route: ReplyRoute | None,
        text: str,
        live: Mapping[int, str] | None = None,
        *,
        resumed: bool = True,
    ) -> list[OutboxPart]:
        """The outbox parts of `text` for `route`; [] when nothing is said (or no channel takes
        the route). Messages the turn's streams opened (`live`, and, for a turn that may have
        run before, what the outbox kept from an earlier run) become the parts' platform ids;
        one the answer does not need becomes a part with no text (removed)."""
        deliverer = self._deliverers.get(route.platform) if route else None
        if route is None or deliverer is None:
            return []
        texts = deliverer.render(route, text) if text.strip() else []
        parts = [
            OutboxPart(f"{turn_id}.{index}", turn_id, key, index, route, part)
            for index, part in enumerate(texts)
        ]
        earlier = await self._outbox.streamed(turn_id) if resumed else {}
        opened = {**earlier, **(live or {})}
        for index, platform_id in sorted(opened.items()):
            if index < len(parts):
                parts[index] = replace(parts[index], platform_id=platform_id)
            else:
                part = OutboxPart(f"{turn_id}.{index}", turn_id, key, index, route, "")
                parts.append(replace(part, platform_id=platform_id))
        return parts

    async def send(
        self, route: ReplyRoute | None, parts: Sequence[OutboxPart], *, reconcile: bool = False
    ) -> DeliveryReport | None:
        """Post a published answer's outbox parts (None when there is nothing to post).
        `reconcile`: the turn ran before (its first run may have shown parts that were never
        recorded), so each part is looked for on the platform first."""
        if route is None:
            return None
        deliverer = self._deliverers.get(route.platform)
        if deliverer is None:
            log.error("no_deliverer", platform=route.platform)
            return DeliveryReport(parts=1, accepted=0, error=f"no channel {route.platform!r}")
        if not parts:
            return None
        with tracing.span("delivery", bot__platform=route.platform, bot__parts=len(parts)) as span:
            report = await self._post(deliverer, parts, first=None, reconcile=reconcile)
            span.set(bot__accepted=report.accepted, bot__delivered=report.delivered)
            if not report.delivered:
                span.failed(report.error or "not every part was accepted")
        return report

    async def leftovers(self, parts: Sequence[OutboxPart]) -> DeliveryReport:
        """Post parts an earlier attempt left undelivered (oldest turn first), reconciling each
        with the platform before posting it."""
        accepted = failed = 0
        errors: list[str] = []
        for turn in _by_turn(parts):
            route = turn[0].route
            deliverer = self._deliverers.get(route.platform)
            if deliverer is None:
                log.warning("outbox_no_deliverer", platform=route.platform, parts=len(turn))
                failed += len(turn)
                continue
            first = await self._first_id(turn)
            report = await self._post(deliverer, turn, first=first, reconcile=True)
            accepted += report.accepted
            failed += report.parts - report.accepted
            if report.error:
                errors.append(report.error)
        error = "; ".join(errors) if errors else ("undeliverable parts" if failed else None)
        return DeliveryReport(parts=accepted + failed, accepted=accepted, error=error)

    async def drain(self) -> DeliveryReport:
        """Post every undelivered part in the outbox (start-up and shutdown)."""
        return await self.leftovers(await self._outbox.undelivered())

    async def _first_id(self, turn: Sequence[OutboxPart]) -> str | None:
        if turn[0].index == 0:
            return None
        earlier = await self._outbox.parts(turn[0].turn_id)
        return next((p.platform_id for p in earlier if p.index == 0), None)

    async def _post(
        self,
        deliverer: Deliverer,
        parts: Sequence[OutboxPart],
        *,
        first: str | None,
        reconcile: bool,
    ) -> DeliveryReport:
        accepted = 0
        for position, part in enumerate(parts):
            wait = RETRY_FIRST
            while True:
                try:
                    platform_id, found = await self._deliver(deliverer, part, first, reconcile)
                    break
                except PartFailed as exc:
                    log.warning("part_refused", part_id=part.part_id, error=str(exc))
                    for rest in parts[position:]:
                        await self._settle(self._outbox.abandon(rest.part_id, str(exc)))
                    return DeliveryReport(len(parts), accepted, str(exc))
                except Exception as exc:  # passing: tried again while the host runs
                    error = type(exc).__name__
                    if self._closing is None or self._closing.is_set():
                        log.warning("part_unsent", part_id=part.part_id, error=error)
                        return DeliveryReport(len(parts), accepted, error)
                    delay = min(RETRY_MAX, max(wait, _retry_after(exc)))
                    log.info("part_retrying", part_id=part.part_id, error=error, wait=delay)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._closing.wait(), delay)
                    wait, reconcile = min(wait * 2, RETRY_MAX), True
            if found:
                log.info("part_reconciled", part_id=part.part_id)
            await self._settle(self._outbox.delivered(part.part_id, platform_id))
            first = platform_id if part.index == 0 else first
            accepted += 1
        return DeliveryReport(len(parts), accepted)

    @staticmethod
    async def _deliver(
        deliverer: Deliverer, part: OutboxPart, first: str | None, reconcile: bool
    ) -> tuple[str, bool]:
        """Post or finish one part; its platform id, and whether it was found already there."""
        found = None
        if part.platform_id is None and reconcile:
            found = await deliverer.find(part, first)
        if found is not None:
            part = replace(part, platform_id=found)  # maybe a stream's: finish it
        if part.platform_id is not None:
            return await deliverer.finish(part, first), found is not None
        return await deliverer.post(part, first), False

    @staticmethod
    async def _settle(write: Awaitable[None]) -> None:
        """A mark that cannot be written (store full) leaves the part for the next start, where
        Slack reconciles it; Telegram may post it once more (the window SPEC §11 names)."""
        try:
            await write
        except Exception as exc:
            log.warning("part_mark_failed", error=type(exc).__name__)


def _retry_after(exc: Exception) -> float:
    return exc.retry_after if isinstance(exc, PartDelayed) else 0.0


def _by_turn(parts: Sequence[OutboxPart]) -> list[list[OutboxPart]]:
    turns: dict[str, list[OutboxPart]] = {}
    for part in parts:
        turns.setdefault(part.turn_id, []).append(part)
    return [sorted(turn, key=lambda p: p.index) for turn in turns.values()]
