"""An outbox deliverer double (the port: `bot.ports.delivery.Deliverer`): it renders an answer as
parts, "posts" each by recording it and naming it on its pretend platform, and can be told to
refuse a part for good or to fail the next posts, so tests see what the host delivered, in order,
and what it does when the platform will not take it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

from bot.errors import PartFailed
from bot.ports.delivery import Deliverer
from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute


class RecordingDeliverer(Deliverer):
    """Posts parts into `posted`; `platform` maps each taken part's id to its platform id (what
    `find` sees there, so a test can say a post went through before a crash).

    `split`: render cuts an answer into parts of at most that many characters (one part when
    None). `refuse`: part ids the platform refuses for good (PartFailed). `failures`: errors
    raised by the next posts, one per post, first first (a PartDelayed is a passing failure)."""

    def __init__(self, name: str = "test", *, split: int | None = None) -> None:
        self.name = name
        self.split = split
        self.posted: list[OutboxPart] = []
        self.finished: list[OutboxPart] = []  # messages already there, made to show a part
        self.platform: dict[str, str] = {}
        self.refuse: set[str] = set()
        self.failures: list[Exception] = []
        self.working_on: list[ReplyRoute] = []  # routes a progress sign was shown for
        self.changed = asyncio.Condition()

    @property
    def texts(self) -> list[str]:
        return [part.text for part in self.posted]

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        if self.split is None or not text:
            return [text]
        return [text[i : i + self.split] for i in range(0, len(text), self.split)]

    async def post(self, part: OutboxPart, first: str | None) -> str:
        if self.failures:
            raise self.failures.pop(0)
        if part.part_id in self.refuse:
            raise PartFailed(f"{self.name} refuses part {part.part_id}")
        async with self.changed:
            platform_id = f"{self.name}-{len(self.posted) + 1}"
            self.posted.append(replace(part, platform_id=platform_id))
            self.platform[part.part_id] = platform_id
            self.changed.notify_all()
        return platform_id

    async def find(self, part: OutboxPart, first: str | None) -> str | None:
        return self.platform.get(part.part_id)

    async def finish(self, part: OutboxPart, first: str | None) -> str:
        """The message already on the platform (`part.platform_id`: found there after a
        restart) is made to show the part, not posted again."""
        if part.platform_id is None:
            raise ValueError(f"part {part.part_id} has no message on the platform to finish")
        self.finished.append(part)
        self.platform[part.part_id] = part.platform_id
        return part.platform_id

    @contextlib.asynccontextmanager
    async def working(self, route: ReplyRoute) -> AsyncIterator[None]:
        self.working_on.append(route)
        yield

    def route_to(self, destination: str) -> ReplyRoute:
        return ReplyRoute(self.name, {"to": destination})

    async def wait_for(self, count: int) -> list[str]:
        """The texts posted, once at least `count` have been."""
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.posted) >= count)
        return self.texts
