"""The Leadership port (`bot.ports.leadership`) as every replica engine keeps it: one holder of a
duty at a time, and a released duty passes to a replica waiting for it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.engines import Engine
from tests.waiting import GUARD

pytestmark = pytest.mark.replica_engines


async def test_a_duty_has_one_holder_and_passes_to_a_waiting_replica(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    name = f"duty-{uuid.uuid4().hex}"
    assert first.leadership is not None
    assert second.leadership is not None
    try:
        await asyncio.wait_for(first.leadership.acquire(name), GUARD)
        await asyncio.wait_for(first.leadership.acquire(name), GUARD)  # held: at once
        waiting = asyncio.create_task(second.leadership.acquire(name))
        assert first.leadership.holds(name)
        assert not second.leadership.holds(name)
        await first.leadership.release(name)
        await asyncio.wait_for(waiting, GUARD)
        assert second.leadership.holds(name)
        assert not first.leadership.holds(name)
    finally:
        await second.leadership.release(name)
        await first.aclose()
        await second.aclose()
