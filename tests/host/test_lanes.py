"""Conversation lanes and the per-person rate, on their own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from bot.errors import LaneFull
from bot.host.lanes import Lanes
from bot.host.ratelimit import MAX_PEOPLE, PersonRate


def _lanes(log: list[str], gate: asyncio.Event | None = None, depth: int = 8) -> Lanes[str, str]:
    async def work(item: str) -> str:
        log.append(f"start {item}")
        await asyncio.sleep(0)
        if gate is not None:
            await gate.wait()
        log.append(f"end {item}")
        return item.upper()

    return Lanes(work, depth=depth, cancelled=lambda item: f"cancelled {item}")


async def test_one_lane_runs_its_items_strictly_in_order() -> None:
    log: list[str] = []
    lanes = _lanes(log)
    futures = [lanes.put("a", item) for item in ("x", "y", "z")]
    assert await asyncio.gather(*futures) == ["X", "Y", "Z"]
    assert log == ["start x", "end x", "start y", "end y", "start z", "end z"]
    assert lanes.depth == 0


async def _until(condition: Callable[[], bool]) -> None:
    """Let the lanes' tasks run until `condition` holds (the test's timeout bounds a hang)."""
    while not condition():
        await asyncio.sleep(0)


async def test_different_lanes_run_at_the_same_time() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    lanes = _lanes(log, gate)
    first, second = lanes.put("a", "x"), lanes.put("b", "y")
    await _until(lambda: len(log) == 2)
    assert sorted(log) == ["start x", "start y"]  # both started, neither finished
    assert lanes.depth == 2
    gate.set()
    assert await asyncio.gather(first, second) == ["X", "Y"]


async def test_a_full_lane_refuses_and_others_still_accept() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    lanes = _lanes(log, gate, depth=1)
    running = lanes.put("a", "x")
    await _until(lambda: log == ["start x"])  # x left the queue and runs
    waiting = lanes.put("a", "y")
    with pytest.raises(LaneFull):
        lanes.put("a", "z")
    other = lanes.put("b", "w")
    gate.set()
    assert await asyncio.gather(running, waiting, other) == ["X", "Y", "W"]


async def test_close_cancels_what_outlives_the_grace() -> None:
    log: list[str] = []
    lanes = _lanes(log, asyncio.Event())  # never released
    running, waiting = lanes.put("a", "x"), lanes.put("a", "y")
    await _until(lambda: log == ["start x"])
    # x can never finish (its gate stays shut), so no grace is long enough: a grace of zero
    # cancels at once, whatever the machine's load, and y never starts.
    await lanes.close(grace=0)
    assert await asyncio.gather(running, waiting) == ["cancelled x", "cancelled y"]
    assert log == ["start x"]
    assert lanes.depth == 0


def test_person_rate_slides_over_a_minute() -> None:
    now = [0.0]
    rate = PersonRate(2, clock=lambda: now[0])
    assert [rate.allow("p"), rate.allow("p"), rate.allow("p")] == [True, True, False]
    assert rate.allow("q")  # someone else is unaffected
    now[0] = 61.0
    assert rate.allow("p")
    assert rate.allow(None)  # no person (console, cron): never limited


def test_person_rate_forgets_quiet_people_past_its_bound() -> None:
    now = [0.0]
    rate = PersonRate(5, clock=lambda: now[0])
    for n in range(MAX_PEOPLE):
        rate.allow(f"p{n}")
    now[0] = 120.0
    rate.allow("late")
    assert len(rate._stamps) == 1


async def test_take_removes_the_wanted_items_at_the_head_and_keeps_the_rest_in_order() -> None:
    log: list[str] = []
    gate = asyncio.Event()
    lanes = _lanes(log, gate)
    running = lanes.put("a", "x")
    await _until(lambda: lanes.running("a"))
    futures = {item: lanes.put("a", item) for item in ("y1", "y2", "z", "y3")}
    taken = lanes.take("a", lambda item: item.startswith("y"))
    assert [item for item, _ in taken] == ["y1", "y2"]  # up to the first one not wanted
    assert [future for _, future in taken] == [futures["y1"], futures["y2"]]
    assert lanes.waiting("a") == 2
    assert lanes.take("b", lambda item: True) == []
    gate.set()
    assert await asyncio.gather(running, futures["z"], futures["y3"]) == ["X", "Z", "Y3"]
    assert not futures["y1"].done()  # the taker resolves what it took
    assert not lanes.running("a")
