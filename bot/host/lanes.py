"""Conversation lanes: one turn at a time per conversation, many conversations at once.

Each conversation key gets a bounded queue and, while it has work, one task that runs its items
strictly in order. A lane disappears when its queue empties, so idle conversations cost nothing.
Closing waits for the lanes up to a grace period, then cancels what is still running: the work
function sees the cancellation and can record what it had done.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import structlog

from bot.errors import LaneFull

log = structlog.get_logger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass
class _Lane(Generic[Item, Result]):
    queue: asyncio.Queue[tuple[Item, asyncio.Future[Result]]]
    task: asyncio.Task[None] | None = None
    running: bool = False
    current: Any = None  # the item running, while one is


class Lanes(Generic[Item, Result]):
    def __init__(
        self,
        work: Callable[[Item], Coroutine[Any, Any, Result]],
        *,
        depth: int,
        cancelled: Callable[[Item], Result],
    ) -> None:
        """`work` runs one item; `cancelled` is the result of an item that never got to finish."""
        self._work = work
        self._depth = depth
        self._cancelled = cancelled
        self._lanes: dict[str, _Lane[Item, Result]] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def depth(self) -> int:
        """Items running or waiting, across every lane."""
        return sum(lane.queue.qsize() + lane.running for lane in self._lanes.values())

    def waiting(self, key: str) -> int:
        """Items queued on `key`'s lane behind the one running (0 when it has no lane)."""
        lane = self._lanes.get(key)
        return lane.queue.qsize() if lane is not None else 0

    def running(self, key: str) -> Item | None:
        """The item of `key`'s lane running now, if one is."""
        lane = self._lanes.get(key)
        return cast("Item", lane.current) if lane is not None and lane.running else None

    def take(
        self, key: str, wanted: Callable[[Item], bool]
    ) -> list[tuple[Item, asyncio.Future[Result]]]:
        """Remove the items at the head of `key`'s queue for which `wanted` holds (up to the
        first it does not hold for, so what stays keeps its order) and return them with their
        futures: the caller runs them as part of its own item and resolves the futures."""
        lane = self._lanes.get(key)
        if lane is None:
            return []
        queued: list[tuple[Item, asyncio.Future[Result]]] = []
        while not lane.queue.empty():
            queued.append(lane.queue.get_nowait())
        taken = 0
        while taken < len(queued) and wanted(queued[taken][0]):
            taken += 1
        for entry in queued[taken:]:
            lane.queue.put_nowait(entry)
        return queued[:taken]

    def put(self, key: str, item: Item, *, bounded: bool = True) -> asyncio.Future[Result]:
        """Queue `item` on `key`'s lane; the future resolves with its result. Raises LaneFull
        when `depth` items already wait, unless `bounded` is false (work taken on before, such
        as what a restart finds unfinished, is never refused)."""
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(asyncio.Queue())
        if bounded and lane.queue.qsize() >= self._depth:
            raise LaneFull(key)
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        lane.queue.put_nowait((item, future))
        self._idle.clear()
        if lane.task is None:
            lane.task = asyncio.create_task(self._drain(key, lane))
        return future

    async def idle(self) -> None:
        await self._idle.wait()

    async def close(self, grace: float) -> None:
        """Let every lane finish for up to `grace` seconds, then cancel what is left."""
        try:
            await asyncio.wait_for(self.idle(), timeout=grace)
        except TimeoutError:
            tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
            log.warning("shutdown_cancelling_turns", lanes=len(tasks))
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain(self, key: str, lane: _Lane[Item, Result]) -> None:
        try:
            while not lane.queue.empty():
                item, future = lane.queue.get_nowait()
                lane.running, lane.current = True, item
                try:
                    result = await self._run_one(item)
                except asyncio.CancelledError:
                    if not future.done():
                        future.set_result(self._cancelled(item))
                    raise
                finally:
                    lane.running, lane.current = False, None
                if not future.done():
                    future.set_result(result)
        finally:
            while not lane.queue.empty():
                item, future = lane.queue.get_nowait()
                if not future.done():
                    future.set_result(self._cancelled(item))
            self._lanes.pop(key, None)
            if not self._lanes:
                self._idle.set()

    async def _run_one(self, item: Item) -> Result:
        """Run one item; if the lane is cancelled meanwhile, let the item see the cancellation
        and finish its own clean-up before the lane goes down."""
        task = asyncio.create_task(self._work(item))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise
