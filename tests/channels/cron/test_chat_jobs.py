"""Jobs set up in chat as the scheduler sees them: read from the source at start, again when
`changed()` is called or the refresh comes, dropped when removed; a failing source keeps what was
read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.ports.cron import ChatSchedule
from bot.turns import ReplyRoute
from channels.cron.chat import job_plan, job_plans
from channels.cron.plan import JobPlan
from channels.cron.runner import CronRunner
from channels.cron.scheduler import CronScheduler, SlotRules
from tests.channels.cron.conftest import START
from tests.channels.cron.doubles import (
    ManualClock,
    MemoryRuns,
    RecordingDeliverer,
    ScriptedSink,
    settle,
    utc,
)

ROUTE = ReplyRoute("slack", {"channel": "C0123456789", "thread_ts": "1700000001.000100"})


def schedule(ident: str, expression: str = "0 * * * *") -> ChatSchedule:
    return ChatSchedule(
        ident, "slack:C0123456789", ROUTE, "slack:T1:U1", expression, "UTC", f"Do {ident}.", START
    )


class Source:
    def __init__(self, *items: ChatSchedule) -> None:
        self.items = list(items)
        self.fail = False

    async def __call__(self) -> Sequence[JobPlan]:
        if self.fail:
            raise ConnectionError("the store is away")
        return [job_plan(item) for item in self.items]


def rig(source: Source, refresh: float = 3600.0) -> tuple[CronScheduler, ScriptedSink, ManualClock]:
    clock = ManualClock(START)
    sink, deliverer, runs = ScriptedSink(), RecordingDeliverer(), MemoryRuns()
    runner = CronRunner(sink, {"slack": deliverer}, runs, now=clock.now)
    scheduler = CronScheduler(
        [],
        runner,
        runs,
        SlotRules(300, 0, 30),
        now=clock.now,
        sleep=clock.sleep,
        source=source,
        refresh=refresh,
    )
    return scheduler, sink, clock


async def test_a_chat_job_runs_in_its_own_conversation_and_posts_to_its_route() -> None:
    scheduler, sink, clock = rig(Source(schedule("a1")))
    await scheduler.start()
    try:
        await clock.advance(60)  # 09:00
        await scheduler.idle()
    finally:
        await scheduler.stop()
    [request] = sink.requests
    assert request.conversation_key == "schedule:a1"
    assert request.route == ROUTE
    assert request.notifies is True
    assert request.text == "Do a1."


async def test_jobs_added_and_removed_are_picked_up_when_changed() -> None:
    source = Source(schedule("a1"))
    scheduler, sink, clock = rig(source)
    await scheduler.start()
    try:
        await clock.advance(60)  # 09:00: a1
        await scheduler.idle()
        source.items = [replace(schedule("b2"), created_at=utc(2024, 6, 3, 9, 0, 30))]
        scheduler.changed()
        await settle()
        assert scheduler.next_fire("a1") is None
        assert scheduler.next_fire("schedule:b2") == utc(2024, 6, 3, 10)
        await clock.advance(3600)  # 10:00: b2 only
        await scheduler.idle()
    finally:
        await scheduler.stop()
    assert [r.conversation_key for r in sink.requests] == ["schedule:a1", "schedule:b2"]


async def test_a_failing_source_keeps_the_jobs_it_gave() -> None:
    source = Source(schedule("a1"))
    scheduler, sink, clock = rig(source, refresh=30)
    await scheduler.start()
    try:
        source.fail = True
        await clock.advance(60)  # a refresh fails at 08:59:30; 09:00 still runs a1
        await scheduler.idle()
    finally:
        await scheduler.stop()
    assert [r.conversation_key for r in sink.requests] == ["schedule:a1"]


async def test_an_unreadable_stored_schedule_is_skipped() -> None:
    runs = MemoryRuns()
    store = StoredSchedules([schedule("ok"), schedule("bad", "61 * * * *")])
    plans = await job_plans(store)
    assert [plan.name for plan in plans] == ["schedule:ok"]
    assert runs.pauses == {}


class StoredSchedules:
    def __init__(self, items: list[ChatSchedule]) -> None:
        self.items = items

    async def add_schedule(self, schedule: ChatSchedule, *, per_place: int, per_person: int) -> str:
        self.items.append(schedule)
        return ""

    async def schedules(self, place: str | None = None) -> list[ChatSchedule]:
        return [s for s in self.items if place is None or s.place == place]

    async def remove_schedule(self, schedule_id: str) -> bool:
        return False
