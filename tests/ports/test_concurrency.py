"""Many lanes writing at once: every turn lands whole, in order, nothing lost or duplicated."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from bot.ports.memory import MemoryCapture
from bot.ports.records import TurnRecord
from bot.ports.stores import OpenStore
from tests.engines import Engine
from tests.store.sqlite.helpers import turn

pytestmark = pytest.mark.all_engines

LANES = 40
TURNS = 6


async def lane(store: OpenStore, n: int) -> None:
    key = f"slack:T1:C1:{n}.0"
    for t in range(TURNS):
        assert await store.inbox.note(source="slack", marks=[f"Ev{n}-{t}"])
        history = await store.history.load(key)
        assert len(history) == 4 * t
        await store.history.publish(key, turn(t))
        now = datetime.now(UTC)
        await store.memory.capture(
            MemoryCapture(key, "slack:C1", f"u{n}", f"Person {n}", f"lane {n} turn {t}", "ok", now)
        )
        await store.records.save(TurnRecord(f"{n}-{t}", key, "slack", now, now, "ok"))


async def test_many_lanes_at_once(engine: Engine, store: OpenStore) -> None:
    await asyncio.gather(*(lane(store, n) for n in range(LANES)))

    for n in range(LANES):
        texts = [e.text for e in await store.history.load(f"slack:T1:C1:{n}.0")]
        assert texts[0::4] == [f"question {t}" for t in range(TURNS)]
    assert await store.memory.count() == LANES * TURNS
    assert len(await store.records.recent(limit=10_000)) == LANES * TURNS
    if engine.name == "sqlite":
        assert await store.db.integrity_check() == "ok"


async def test_two_openings_of_one_store_write_at_once(engine: Engine, store: OpenStore) -> None:
    # A second open of the same store, as `bot history reset` beside `bot run` (or a second
    # replica) would make.
    other = await engine.open()
    try:
        await asyncio.gather(
            *(lane(store, n) for n in range(0, 10)), *(lane(other, n) for n in range(10, 20))
        )
        assert await other.history.reset("slack:T1:C1:3.0")
        assert await store.history.load("slack:T1:C1:3.0") == []
        assert len(await store.history.load("slack:T1:C1:13.0")) == 4 * TURNS
    finally:
        await other.aclose()
