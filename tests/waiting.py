"""Waiting in tests for something that happens without a call to wake the waiter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

GUARD = 15.0  # seconds: a hang becomes a failure; nothing is measured with it


async def until(
    condition: Callable[[], object],
    *,
    within: float = GUARD,
    state: Callable[[], object] = lambda: None,
) -> None:
    """Return once `condition()` holds, checking every 10 ms; after `within` seconds fail with
    what `state()` says (what the test knows of the world then)."""
    try:
        async with asyncio.timeout(within):
            while not condition():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"still not so after {within} s; state: {state()!r}") from None
