"""A run a cost breaker stopped: recorded `stopped`, never retried, its job paused, the destination
told once (SPEC §17)."""

from __future__ import annotations

from collections import deque

from bot import replies
from bot.ports.cron import CronRunStatus, CronTrigger
from channels.cron.runner import breaker_of
from tests.channels.cron.conftest import RigFactory, job
from tests.channels.cron.doubles import MemoryRuns, Step

STOPPED = Step(outcome="stopped", text="", delivery=None, error="breaker:repeat: the same call")


async def test_a_stopped_run_pauses_its_job_and_tells_the_destination_once(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job(notify="slack:C0123456789"), retries=2)
    rig.sink.script = deque([STOPPED])
    await rig.start()
    await rig.clock.advance(60)  # 09:00: the run loops and is stopped
    await rig.scheduler.idle()
    await rig.clock.advance(3 * 3600)  # 10:00, 11:00, 12:00: paused, nothing runs
    await rig.scheduler.idle()

    assert len(rig.sink.requests) == 1, "a stopped run is not retried, a paused job never fires"
    (record,) = rig.records()
    assert record.status is CronRunStatus.STOPPED
    assert record.error == "breaker:repeat: the same call"
    assert [text for _, text in rig.deliverer.posted] == [replies.job_paused("digest", "repeat")]
    assert "bot cron resume digest" in rig.deliverer.posted[0][1]
    assert "\n" not in rig.deliverer.posted[0][1]
    assert isinstance(rig.runs, MemoryRuns)
    assert [p.job for p in await rig.runs.paused()] == ["digest"]


async def test_a_resumed_job_runs_at_its_next_slot(make_rig: RigFactory) -> None:
    rig = make_rig(job(notify="slack:C0123456789"))
    rig.sink.script = deque([STOPPED])
    await rig.start()
    await rig.clock.advance(60)
    await rig.scheduler.idle()
    assert await rig.runs.resume("digest") is True
    assert await rig.runs.resume("digest") is False
    await rig.clock.advance(3600)  # 10:00
    await rig.scheduler.idle()
    statuses = [r.status for r in rig.records()]
    assert statuses == [CronRunStatus.STOPPED, CronRunStatus.OK]


async def test_a_second_stop_while_paused_tells_nobody_again(make_rig: RigFactory) -> None:
    rig = make_rig(job(notify="slack:C0123456789"))
    rig.sink.default = STOPPED
    plan = rig.jobs[0].run
    runner = rig.scheduler._runner
    await runner.run(plan, "go", trigger=CronTrigger.MANUAL)
    await runner.run(plan, "go", trigger=CronTrigger.MANUAL)
    assert len(rig.deliverer.posted) == 1


async def test_a_webhook_run_that_is_stopped_pauses_nothing(make_rig: RigFactory) -> None:
    from dataclasses import replace

    rig = make_rig(job(notify="slack:C0123456789"))
    rig.sink.default = STOPPED
    hook_plan = replace(rig.jobs[0].run, channel="webhook", record_key="webhook:deploys")
    result = await rig.scheduler._runner.run(hook_plan, "go", trigger=CronTrigger.WEBHOOK)
    assert result.record.status is CronRunStatus.STOPPED
    assert rig.deliverer.posted == []
    assert await rig.runs.paused() == []


def test_the_breaker_is_read_from_the_error() -> None:
    assert breaker_of("breaker:day: stopped") == "day"
    assert breaker_of("breaker:run: stopped") == "run"
    assert breaker_of("something else") == "breaker"
    assert breaker_of(None) == "breaker"
