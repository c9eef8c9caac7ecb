"""Run records: round trip, upsert, last slot and interrupted runs on both engines; retention and
the read-only view on SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import aiosqlite
import pytest

from bot.config import MemorySettings, StoreSettings
from bot.ports.cron import ChatSchedule, CronRun, CronRunStatus, CronTrigger
from bot.ports.stores import RunRecords
from bot.store.sqlite import open_store
from bot.store.sqlite.cron_runs import SqliteCronRuns, open_cron_runs
from bot.turns import ReplyRoute
from tests.channels.cron.doubles import utc
from tests.engines import Engine

T0 = utc(2024, 6, 3, 9)


@pytest.fixture
async def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "bot.sqlite3"
    store = await open_store(StoreSettings(path=path), MemorySettings())
    await store.aclose()
    return path


pytestmark = pytest.mark.all_engines


@pytest.fixture
async def runs(engine: Engine) -> AsyncIterator[RunRecords]:
    store = await engine.open()
    opened = await store.cron_runs()
    yield opened
    await opened.aclose()
    await store.aclose()


def run(run_id: str, minutes: int = 0, **fields: object) -> CronRun:
    base = CronRun(
        run_id=run_id,
        job="digest",
        trigger=CronTrigger.SCHEDULE,
        fired_at=T0 + timedelta(minutes=minutes),
        scheduled_for=T0 + timedelta(minutes=minutes),
    )
    return replace(base, **fields)  # type: ignore[arg-type]


async def test_a_record_round_trips_and_finishing_replaces_it(runs: RunRecords) -> None:
    started = run("r1")
    await runs.save(started)
    assert await runs.latest("digest") == started
    finished = run(
        "r1",
        status=CronRunStatus.UNDELIVERED,
        finished_at=T0 + timedelta(seconds=12),
        parts=3,
        accepted=2,
        error="msg_too_long",
    )
    await runs.save(finished)
    assert await runs.recent("digest") == [finished]
    assert await runs.latest("other") is None


async def test_last_slot_is_the_latest_slot_served_ignoring_manual_runs(
    runs: RunRecords,
) -> None:
    assert await runs.last_slot("digest") is None
    await runs.save(run("a", 0))
    await runs.save(run("b", 60))
    await runs.save(run("m", 90, trigger=CronTrigger.MANUAL, scheduled_for=None))
    assert await runs.last_slot("digest") == T0 + timedelta(minutes=60)
    assert [r.run_id for r in await runs.recent("digest")] == ["m", "b", "a"]


async def test_records_survive_reopening(engine: Engine, runs: RunRecords) -> None:
    await runs.save(run("kept", status=CronRunStatus.OK, delivered=True, parts=1, accepted=1))
    store = await engine.open()
    again = await store.cron_runs()
    try:
        latest = await again.latest("digest")
    finally:
        await again.aclose()
        await store.aclose()
    assert latest is not None
    assert latest.delivered is True


async def test_retention_keeps_the_newest_records_of_each_job(store_path: Path) -> None:
    runs = await open_cron_runs(store_path)
    await runs.aclose()
    conn = await aiosqlite.connect(store_path, isolation_level=None)
    bounded = SqliteCronRuns(conn, keep_per_job=5, owns_connection=True)
    await bounded.ensure_table()
    for minute in range(12):
        await bounded.save(run(f"r{minute}", minute, status=CronRunStatus.OK))
    await bounded.save(run("x", 3, job="other", status=CronRunStatus.OK))
    kept = [r.run_id for r in await bounded.recent("digest", limit=100)]
    assert kept == ["r11", "r10", "r9", "r8", "r7"]
    assert len(await bounded.recent("other")) == 1
    await bounded.aclose()


async def test_records_older_than_the_age_bound_are_pruned(store_path: Path) -> None:
    conn = await aiosqlite.connect(store_path, isolation_level=None)
    bounded = SqliteCronRuns(conn, max_age_days=1, owns_connection=True)
    await bounded.ensure_table()
    await bounded.save(run("old", 0, status=CronRunStatus.OK))
    await bounded.save(run("new", 2 * 24 * 60, status=CronRunStatus.OK))
    assert [r.run_id for r in await bounded.recent("digest")] == ["new"]
    await bounded.aclose()


async def test_running_records_are_marked_interrupted(runs: RunRecords) -> None:
    await runs.save(run("stale"))
    await runs.save(run("done", 1, status=CronRunStatus.OK))
    assert await runs.interrupt_running(T0 + timedelta(hours=1)) == 1
    stale, *_ = [r for r in await runs.recent("digest") if r.run_id == "stale"]
    assert stale.status is CronRunStatus.INTERRUPTED
    assert stale.finished_at == T0 + timedelta(hours=1)
    assert stale.error


async def test_a_read_only_view_of_a_store_without_runs_reads_empty(store_path: Path) -> None:
    view = await open_cron_runs(store_path, read_only=True)
    try:
        assert await view.latest("digest") is None
        assert await view.last_slot("digest") is None
    finally:
        await view.aclose()


async def test_opening_never_creates_a_store_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.sqlite3"
    with pytest.raises(FileNotFoundError, match="Fix:"):
        await open_cron_runs(missing)
    assert not missing.exists()


async def test_each_slot_is_claimed_once_across_openings(engine: Engine, runs: RunRecords) -> None:
    store = await engine.open()  # a second replica on the same store
    other = await store.cron_runs()
    try:
        claims = await asyncio.gather(
            *(r.claim_slot("digest", T0) for r in (runs, other, runs, other))
        )
        assert claims.count(True) == 1
        assert await other.claim_slot("digest", T0 + timedelta(hours=1))
        assert await runs.claim_slot("other-job", T0)
    finally:
        await other.aclose()
        await store.aclose()


async def test_a_pause_is_set_once_read_by_another_opening_and_lifted(
    engine: Engine, runs: RunRecords
) -> None:
    assert await runs.pause("digest", "repeat", T0) is True
    assert await runs.pause("digest", "run", T0 + timedelta(minutes=1)) is False
    store = await engine.open()
    other = await store.cron_runs()
    try:
        assert [(p.job, p.reason, p.paused_at) for p in await other.paused()] == [
            ("digest", "repeat", T0)
        ]
        assert await other.resume("digest") is True
    finally:
        await other.aclose()
        await store.aclose()
    assert await runs.paused() == []
    assert await runs.resume("digest") is False


def chat_schedule(
    ident: str, place: str = "slack:C1", creator: str = "slack:T1:U1"
) -> ChatSchedule:
    return ChatSchedule(
        id=ident,
        place=place,
        route=ReplyRoute("slack", {"channel": "C1", "thread_ts": "17.1"}),
        creator=creator,
        expression="0 9 * * 1-5",
        timezone="Europe/Berlin",
        prompt="Post a summary.",
        created_at=T0,
    )


async def test_chat_schedules_keep_their_bounds_and_round_trip(runs: RunRecords) -> None:
    assert await runs.add_schedule(chat_schedule("a"), per_place=2, per_person=3) == ""
    assert await runs.add_schedule(chat_schedule("b"), per_place=2, per_person=3) == ""
    assert await runs.add_schedule(chat_schedule("c"), per_place=2, per_person=3) == "place"
    elsewhere = chat_schedule("d", place="slack:C2")
    assert await runs.add_schedule(elsewhere, per_place=2, per_person=3) == ""
    another = chat_schedule("e", place="slack:C3")
    assert await runs.add_schedule(another, per_place=2, per_person=3) == "person"
    assert [s.id for s in await runs.schedules()] == ["a", "b", "d"]
    [first, _] = await runs.schedules("slack:C1")
    assert first == chat_schedule("a")  # the route comes back whole (host-side only)
    assert await runs.remove_schedule("a") is True
    assert await runs.remove_schedule("a") is False
    assert [s.id for s in await runs.schedules("slack:C1")] == ["b"]


async def test_concurrent_adds_never_pass_the_bound(engine: Engine, runs: RunRecords) -> None:
    store = await engine.open()
    other = await store.cron_runs()
    try:
        results = await asyncio.gather(
            *[
                (runs if n % 2 else other).add_schedule(
                    chat_schedule(f"s{n}", creator=f"p{n}"), per_place=3, per_person=10
                )
                for n in range(8)
            ]
        )
    finally:
        await other.aclose()
        await store.aclose()
    assert sorted(results) == [""] * 3 + ["place"] * 5
    assert len(await runs.schedules("slack:C1")) == 3
