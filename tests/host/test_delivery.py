"""Parts are tried again in-process (bot.host.delivery): after a passing failure, never sooner than
the platform's Retry-After, until taken; a refusal for good, or the host closing, ends it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bot.errors import PartDelayed, PartFailed
from bot.host.delivery import Delivery
from bot.ports.delivery import Deliverer
from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute
from tests.waiting import until

ROUTE = ReplyRoute("test", {"to": "x"})
PART = OutboxPart("t.0", "t", "test:k", 0, ROUTE, "the answer")


class Parts(Deliverer):
    """A deliverer whose posts fail as scripted (an exception) or land (an id)."""

    def __init__(self, *script: Exception | str) -> None:
        self.script = list(script)
        self.tries: list[float] = []
        self.looked: list[str] = []

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        return [text]

    async def post(self, part: OutboxPart, first: str | None) -> str:
        self.tries.append(time.monotonic())
        outcome = self.script.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def find(self, part: OutboxPart, first: str | None) -> str | None:
        self.looked.append(part.part_id)
        return None

    def route_to(self, destination: str) -> ReplyRoute:
        return ROUTE


class Marks:
    """The outbox's marks, in lists."""

    def __init__(self) -> None:
        self.marked: list[tuple[str, str]] = []
        self.abandoned: list[str] = []

    async def delivered(self, part_id: str, platform_id: str) -> None:
        self.marked.append((part_id, platform_id))

    async def abandon(self, part_id: str, error: str) -> None:
        self.abandoned.append(part_id)


def delivery(marks: Marks, parts: Parts, closing: asyncio.Event) -> Delivery:
    outbox: Any = marks  # only the marks are used on this path
    return Delivery(outbox, {"test": parts}, closing)


async def test_a_delayed_part_is_tried_again_no_sooner_than_retry_after() -> None:
    marks = Marks()
    parts = Parts(PartDelayed("busy", 0.3), PartDelayed("busy", 0.3), "m1")
    report = await delivery(marks, parts, asyncio.Event()).leftovers([PART])
    assert report.delivered
    assert marks.marked == [("t.0", "m1")]
    gaps = [later - earlier for earlier, later in zip(parts.tries, parts.tries[1:], strict=False)]
    assert len(gaps) == 2
    assert all(gap >= 0.3 for gap in gaps)  # a lower bound: a slow machine only waits longer
    assert parts.looked == ["t.0"] * 3  # each try looks for the part on the platform first


async def test_a_refusal_for_good_ends_the_retries() -> None:
    marks = Marks()
    parts = Parts(PartDelayed("busy", 0.0), PartFailed("no such chat"))
    report = await delivery(marks, parts, asyncio.Event()).leftovers([PART])
    assert (report.accepted, report.error) == (0, "no such chat")
    assert marks.abandoned == ["t.0"]


async def test_a_closing_host_leaves_the_part_in_the_outbox() -> None:
    marks, closing = Marks(), asyncio.Event()
    parts = Parts(*[PartDelayed("busy", 0.05)] * 1000)
    task = asyncio.create_task(delivery(marks, parts, closing).leftovers([PART]))
    await until(lambda: len(parts.tries) >= 2)
    closing.set()
    report = await task
    assert (report.accepted, report.error) == (0, "PartDelayed")
    assert marks.marked == []
    assert marks.abandoned == []  # still undelivered: the drain and the next start post it
