"""Waiting in tests for something that happens without a call to wake the waiter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

GUARD = 15.0  # seconds: a hang becomes a failure; nothing is measured with it


async def until(condition: Callable[[], object]) -> None:
    """Return once `condition()` holds, checking every 10 ms."""
    async with asyncio.timeout(GUARD):
        while not condition():
            await asyncio.sleep(0.01)
