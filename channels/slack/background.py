"""Calls the Slack channel makes after an ack, off the intake path (the assistant pane's prompts
and titles, slash command answers, button presses): started at once, waited for at stop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Background:
    """The calls under way; `wait` gives them a bounded time to finish."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def running(self) -> int:
        """How many calls are still under way."""
        return len(self._tasks)

    def run(self, call: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(call)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, within: float) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=within)
