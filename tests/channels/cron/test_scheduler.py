"""The scheduler on a manual clock: slots, no overlap, misfires, catch-up once, retries, stop."""

from __future__ import annotations

import asyncio
from collections import deque

from bot.ports import CronRunStatus, CronTrigger, DeliveryReport
from bot.turns import ConversationKind, ReplyRoute
from tests.channels.cron.conftest import RigFactory, job
from tests.channels.cron.doubles import Step, settle, utc


async def test_a_fired_job_is_a_request_driven_turn_routed_to_the_destination_top_level(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job(notify="slack:C0123456789"))
    await rig.start()
    assert rig.sink.requests == []
    await rig.clock.advance(60)  # 09:00
    await rig.scheduler.idle()
    (request,) = rig.sink.requests
    assert request.kind is ConversationKind.REQUEST
    assert request.channel == "cron"
    assert request.conversation_key == "cron:digest"
    assert request.text == "Write the digest."
    assert request.notifies is True
    assert request.route == ReplyRoute("slack", {"channel": "C0123456789"})
    assert request.speaker is None
    assert request.surface is None
    assert request.person is None
    assert request.received_at == utc(2024, 6, 3, 9, 0)
    (record,) = rig.records()
    assert record.run_id == request.turn_id
    assert record.trigger is CronTrigger.SCHEDULE
    assert record.scheduled_for == utc(2024, 6, 3, 9, 0)
    assert record.status is CronRunStatus.OK
    assert record.delivered is True


async def test_a_job_without_notify_has_no_route_and_is_not_delivered(make_rig: RigFactory) -> None:
    rig = make_rig(job(conversation_id="team-digest"))
    await rig.start()
    await rig.clock.advance(60)
    await rig.scheduler.idle()
    (request,) = rig.sink.requests
    assert request.route is None
    assert request.notifies is False
    assert request.conversation_key == "team-digest"
    (record,) = rig.records()
    assert record.status is CronRunStatus.OK
    assert record.delivered is False


async def test_each_slot_fires_once_and_disabled_jobs_never(make_rig: RigFactory) -> None:
    rig = make_rig(job(), job("paused", "* * * * *", enabled=False))
    await rig.start()
    await rig.clock.advance(3 * 3600)  # 09:00, 10:00, 11:00
    await rig.scheduler.idle()
    slots = [r.scheduled_for for r in rig.records()]
    assert slots == [utc(2024, 6, 3, h) for h in (9, 10, 11)]
    assert rig.records("paused") == []
    assert rig.scheduler.next_fire("digest") == utc(2024, 6, 3, 12)


async def test_no_overlap_slots_during_a_long_run_collapse_into_one_catch_up(
    make_rig: RigFactory,
) -> None:
    release = asyncio.Event()
    rig = make_rig(job(schedule="* * * * *"))
    rig.sink.script = deque([Step(hold=release)])
    await rig.start()
    await rig.clock.advance(60)  # 09:00 fires and hangs
    await rig.clock.advance(150)  # 09:01 and 09:02 come while it runs
    assert len(rig.sink.requests) == 1
    assert rig.scheduler.running("digest")
    release.set()
    await settle()
    await rig.scheduler.idle()
    records = rig.records()
    assert [(r.trigger, r.scheduled_for) for r in records] == [
        (CronTrigger.SCHEDULE, utc(2024, 6, 3, 9, 0)),
        (CronTrigger.CATCH_UP, utc(2024, 6, 3, 9, 2)),
    ]
    # Both runs finished before the next slot; the two never overlapped.
    assert all(r.status is CronRunStatus.OK for r in records)


async def test_a_slot_deferred_longer_than_the_grace_is_skipped(make_rig: RigFactory) -> None:
    release = asyncio.Event()
    rig = make_rig(job(schedule="*/5 * * * *"), grace=120)
    rig.sink.script = deque([Step(hold=release)])
    await rig.start()
    await rig.clock.advance(60)  # 09:00 fires and hangs
    await rig.clock.advance(5 * 60)  # 09:05 is deferred
    await rig.clock.advance(3 * 60)  # 09:08: the deferred slot is now 3 minutes old
    release.set()
    await settle()
    await rig.scheduler.idle()
    assert [r.scheduled_for for r in rig.records()] == [utc(2024, 6, 3, 9, 0)]


async def test_with_no_grace_on_time_slots_still_run_and_late_ones_do_not(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job(), grace=0)
    await rig.start()
    await rig.clock.advance(60)  # exactly 09:00
    await rig.scheduler.idle()
    rig.clock.jump(3600 + 30)  # 10:00:30 before the loop looks again: 30 s late
    await rig.clock.advance(0)
    await rig.scheduler.idle()
    assert [r.scheduled_for for r in rig.records()] == [utc(2024, 6, 3, 9)]


async def test_a_late_wake_runs_the_latest_slot_once_within_the_grace(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job(schedule="* * * * *"), grace=300)
    await rig.start()
    rig.clock.jump(4 * 60)  # suspended through 09:00, 09:01 and 09:02; now 09:03
    await rig.clock.advance(0)
    await rig.scheduler.idle()
    assert [r.scheduled_for for r in rig.records()] == [utc(2024, 6, 3, 9, 3)]


async def test_a_wake_later_than_the_grace_skips_the_slot(make_rig: RigFactory) -> None:
    rig = make_rig(job(), grace=300)
    await rig.start()
    rig.clock.jump(11 * 60)  # 09:10: the 09:00 slot is ten minutes old
    await rig.clock.advance(0)
    await rig.scheduler.idle()
    assert rig.records() == []
    assert rig.scheduler.next_fire("digest") == utc(2024, 6, 3, 10)


async def test_after_downtime_a_missed_slot_is_caught_up_once(make_rig: RigFactory) -> None:
    first = make_rig(job(schedule="* * * * *"))
    await first.start()
    await first.clock.advance(60)  # 09:00 runs
    await first.scheduler.idle()
    await first.scheduler.stop()
    # Down for an hour; back at 10:00:30. Sixty slots were missed; one is run, the latest.
    first.clock.jump(3600 + 30)
    second = make_rig(job(schedule="* * * * *"), runs=first.runs, clock=first.clock)
    await second.start()
    await second.scheduler.idle()
    records = second.records()
    assert [(r.trigger, r.scheduled_for) for r in records] == [
        (CronTrigger.SCHEDULE, utc(2024, 6, 3, 9, 0)),
        (CronTrigger.CATCH_UP, utc(2024, 6, 3, 10, 0)),
    ]
    await second.clock.advance(30)  # 10:01 is an ordinary slot again
    await second.scheduler.idle()
    assert [r.scheduled_for for r in second.records()][-1] == utc(2024, 6, 3, 10, 1)


async def test_after_downtime_longer_than_the_grace_nothing_is_caught_up(
    make_rig: RigFactory,
) -> None:
    first = make_rig(job())
    await first.start()
    await first.clock.advance(60)
    await first.scheduler.idle()
    await first.scheduler.stop()
    first.clock.jump(3600 + 10 * 60)  # 10:10: the 10:00 slot is ten minutes old
    second = make_rig(job(), runs=first.runs, clock=first.clock)
    await second.start()
    await second.scheduler.idle()
    assert len(second.records()) == 1


async def test_a_slot_that_already_ran_is_not_run_again_after_a_restart(
    make_rig: RigFactory,
) -> None:
    first = make_rig(job())
    await first.start()
    await first.clock.advance(90)  # 09:00 runs; now 09:00:30
    await first.scheduler.idle()
    await first.scheduler.stop()
    second = make_rig(job(), runs=first.runs, clock=first.clock)
    await second.start()
    await second.scheduler.idle()
    assert len(second.records()) == 1


async def test_a_job_never_run_before_is_not_caught_up_at_first_start(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job())
    rig.clock.jump(120)  # started at 09:01, one minute after a slot
    await rig.start()
    await rig.scheduler.idle()
    assert rig.records() == []


async def test_a_run_left_running_by_a_dead_process_is_marked_interrupted(
    make_rig: RigFactory,
) -> None:
    release = asyncio.Event()
    first = make_rig(job())
    first.sink.script = deque([Step(hold=release)])
    await first.start()
    await first.clock.advance(60)
    # The process dies mid-run: its record still says running. A new process settles it.
    (stale,) = first.records()
    assert stale.status is CronRunStatus.RUNNING
    second = make_rig(job(), runs=first.runs, clock=first.clock)
    await second.start()
    (settled,) = second.records()
    assert settled.status is CronRunStatus.INTERRUPTED
    release.set()


async def test_a_failed_run_is_retried_with_growing_delays_then_given_up(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job(), retries=2, retry_delay=30)
    rig.sink.default = Step(outcome="failed", error="model overloaded")
    await rig.start()
    await rig.clock.advance(60)  # 09:00 fails
    assert len(rig.sink.requests) == 1
    await rig.clock.advance(29)
    assert len(rig.sink.requests) == 1
    await rig.clock.advance(1)  # 09:00:30, the first retry
    assert len(rig.sink.requests) == 2
    await rig.clock.advance(119)
    assert len(rig.sink.requests) == 2
    await rig.clock.advance(1)  # 09:02:30, the second retry (four times longer)
    assert len(rig.sink.requests) == 3
    await rig.clock.advance(30 * 60)
    await rig.scheduler.idle()
    records = rig.records()
    assert len(records) == 3  # bounded: no fourth attempt
    assert [r.attempt for r in records] == [1, 2, 3]
    assert [r.trigger for r in records] == [
        CronTrigger.SCHEDULE,
        CronTrigger.RETRY,
        CronTrigger.RETRY,
    ]
    assert all(r.scheduled_for == utc(2024, 6, 3, 9) for r in records)
    assert all(r.status is CronRunStatus.FAILED for r in records)
    assert records[0].error == "failed: model overloaded"


async def test_a_retry_that_succeeds_ends_the_retries(make_rig: RigFactory) -> None:
    rig = make_rig(job(), retries=3)
    rig.sink.script = deque([Step(outcome="failed", error="timeout")])
    await rig.start()
    await rig.clock.advance(60 + 30)
    await rig.clock.advance(30 * 60)
    await rig.scheduler.idle()
    assert [r.status for r in rig.records()] == [CronRunStatus.FAILED, CronRunStatus.OK]


async def test_retries_never_run_past_the_next_slot(make_rig: RigFactory) -> None:
    rig = make_rig(job(schedule="* * * * *"), retries=5, retry_delay=30)
    rig.sink.script = deque([Step(outcome="failed", error="x"), Step(outcome="failed", error="x")])
    await rig.start()
    await rig.clock.advance(60)  # 09:00 fails; retry at 09:00:30 fails; 120 s would pass 09:01
    await rig.clock.advance(30)
    await rig.clock.advance(30)  # 09:01 runs as an ordinary slot
    await rig.scheduler.idle()
    assert [(r.trigger, r.scheduled_for) for r in rig.records()] == [
        (CronTrigger.SCHEDULE, utc(2024, 6, 3, 9, 0)),
        (CronTrigger.RETRY, utc(2024, 6, 3, 9, 0)),
        (CronTrigger.SCHEDULE, utc(2024, 6, 3, 9, 1)),
    ]


async def test_an_answer_nobody_accepted_is_posted_again_without_a_new_turn(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(job(notify="slack:C0123456789"))
    rig.sink.script = deque(
        [Step(delivery=DeliveryReport(parts=1, accepted=0, error="ratelimited"))]
    )
    await rig.start()
    await rig.clock.advance(60)
    await rig.clock.advance(30)
    await rig.scheduler.idle()
    first, again = rig.records()
    assert first.status is CronRunStatus.UNDELIVERED
    assert first.delivered is False
    assert first.error == "ratelimited"
    assert again.trigger is CronTrigger.REDELIVERY
    assert again.delivered is True
    assert len(rig.sink.requests) == 1  # the model was not asked twice
    assert rig.deliverer.posted == [(ReplyRoute("slack", {"channel": "C0123456789"}), "the answer")]


async def test_a_partly_delivered_answer_is_not_posted_again(make_rig: RigFactory) -> None:
    rig = make_rig(job(notify="slack:C0123456789"))
    partial = DeliveryReport(parts=3, accepted=2, error="msg_too_long")
    rig.sink.script = deque([Step(delivery=partial)])
    await rig.start()
    await rig.clock.advance(60)
    await rig.clock.advance(10 * 60)
    await rig.scheduler.idle()
    (record,) = rig.records()
    assert record.status is CronRunStatus.UNDELIVERED
    assert (record.parts, record.accepted, record.delivered) == (3, 2, False)
    assert rig.deliverer.posted == []


async def test_silent_runs_post_nothing_and_are_not_retried(make_rig: RigFactory) -> None:
    rig = make_rig(job(notify="slack:C0123456789"))
    rig.sink.default = Step(outcome="silent", text="NO_REPLY", delivery=None)
    await rig.start()
    await rig.clock.advance(60)
    await rig.clock.advance(10 * 60)
    await rig.scheduler.idle()
    (record,) = rig.records()
    assert record.status is CronRunStatus.SILENT
    assert record.delivered is False
    assert rig.deliverer.posted == []


async def test_stop_cancels_a_retry_wait_at_once(make_rig: RigFactory) -> None:
    rig = make_rig(job(), retries=2)
    rig.sink.default = Step(outcome="failed", error="x")
    await rig.start()
    await rig.clock.advance(60)
    assert rig.scheduler.running("digest")  # waiting to retry
    await rig.scheduler.stop(grace=3600)  # would hang if it waited for the retry
    assert not rig.scheduler.running("digest")
    assert len(rig.sink.requests) == 1


async def test_stop_lets_a_run_in_flight_finish(make_rig: RigFactory) -> None:
    release = asyncio.Event()
    rig = make_rig(job())
    rig.sink.script = deque([Step(hold=release)])
    await rig.start()
    await rig.clock.advance(60)
    stopping = asyncio.create_task(rig.scheduler.stop(grace=3600))
    await settle()
    assert not stopping.done()
    release.set()
    await stopping
    (record,) = rig.records()
    assert record.status is CronRunStatus.OK


async def test_jobs_run_on_their_own_timezones_wall_clock(make_rig: RigFactory) -> None:
    rig = make_rig(
        job("berlin", "0 11 * * *", timezone="Europe/Berlin"),
        job("tokyo", "0 18 * * *", timezone="Asia/Tokyo"),
    )
    await rig.start()
    await rig.clock.advance(2 * 3600)
    await rig.scheduler.idle()
    assert [r.scheduled_for for r in rig.records("berlin")] == [utc(2024, 6, 3, 9)]  # CEST
    assert [r.scheduled_for for r in rig.records("tokyo")] == [utc(2024, 6, 3, 9)]  # JST


async def test_two_schedulers_on_one_store_run_each_slot_once(make_rig: RigFactory) -> None:
    # Two replicas: the same clock and run records, each with its own scheduler and host.
    first = make_rig()
    second = make_rig(runs=first.runs, clock=first.clock)
    await first.start()
    await second.start()

    for _ in range(3):
        await first.clock.advance(3600)
        await first.scheduler.idle()
        await second.scheduler.idle()

    assert len(first.sink.requests) + len(second.sink.requests) == 3
    slots = [r.scheduled_for for r in first.records()]
    assert len(slots) == len(set(slots)) == 3
