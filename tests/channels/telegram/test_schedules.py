"""A schedule set up in a Telegram group posts there at its time exactly once (SPEC §17): on one
host, and with two replicas (whole Apps) on one PostgreSQL database, each with its own scheduler
watching the same job: the slot claim lets only one of them run it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from structlog.testing import capture_logs

from bot.cli.compose import App, Runs
from bot.ports.stores import RunRecords
from channels.cron.chat import job_plans
from channels.cron.scheduler import CronScheduler, SlotRules
from tests.channels.cron.doubles import ManualClock, utc
from tests.channels.telegram.conftest import MakeConfig
from tests.engines import Engine
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

GROUP_ID = -1009876543210
ALICE_ID = 4242
SCHEDULES = f"""
[schedules]
allowed = ["telegram:{ALICE_ID}"]

[[surfaces]]
platform = "telegram"
kind = "group"
tools = ["schedule"]
"""
CREATE = Reply(
    tool_calls=[
        ToolCall(
            "schedule",
            {"action": "create", "when": "every day at 9", "prompt": "Post the standup note."},
        )
    ]
)
NOTE = "Standup: two reviews waiting."
ONE_HOST = Runs(http=False, scheduler=False)


def scheduler(app: App, records: RunRecords, clock: ManualClock) -> CronScheduler:
    assert app.cron_runner is not None
    return CronScheduler(
        app.cron_jobs,
        app.cron_runner,
        records,
        SlotRules(300, 0, 30),
        now=clock.now,
        sleep=clock.sleep,
        source=lambda: job_plans(records),
        refresh=86_400,  # read at start only: a read is I/O the manual clock cannot wait for
    )


async def create_in_group(tg: FakeTelegram, app: App) -> None:
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    await tg.push(
        tg.message(group, alice, "post the standup note here every day at 9", mention=True)
    )
    await tg.wait_for(lambda: len(tg.sent_to(GROUP_ID)) == 1)
    await app.host.idle()


async def run_nine_oclock(apps: Sequence[App]) -> list[RunRecords]:
    """Every app's scheduler watches the job; the clock moves to 09:00 and past it."""
    clock = ManualClock(utc(2030, 1, 7, 6, 0))  # 07:00 in the agent's zone (Europe/Berlin)
    opened = [await app.store.cron_runs() for app in apps]
    schedulers = [scheduler(app, records, clock) for app, records in zip(apps, opened, strict=True)]
    for each in schedulers:
        await each.start()
    try:
        await clock.advance(2 * 3600)  # 09:00 Berlin
        for each in schedulers:
            await each.idle()
        for app in apps:
            await app.host.idle()
        await clock.advance(3600)
        for each in schedulers:
            await each.idle()
    finally:
        for each in schedulers:
            await each.stop()
    return opened


async def test_a_group_schedule_posts_there_at_its_time_exactly_once(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script(CREATE, "Done: every day at 9.", NOTE)
    async with App(make_config(SCHEDULES), runs=ONE_HOST) as app:
        await create_in_group(tg, app)
        [records] = await run_nine_oclock([app])
        [job] = await records.schedules()
        run = await records.latest(job.job)
        await records.aclose()
    posted = [sent.plain for sent in tg.sent_to(GROUP_ID)]
    assert posted == ["Done: every day at 9.", NOTE]
    assert job.place == f"telegram:{GROUP_ID}"
    assert run is not None
    assert run.delivered is True


@pytest.mark.postgres_only
async def test_two_replicas_post_a_group_schedule_once(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig, engine: Engine
) -> None:
    config = make_config(SCHEDULES, BOT_STORE__URL=str(engine.location))
    claude.script(CREATE, "Done: every day at 9.", NOTE, NOTE)
    async with App(config, runs=ONE_HOST) as first, App(config, runs=ONE_HOST) as second:
        await create_in_group(tg, first)
        with capture_logs() as logs:
            opened = await run_nine_oclock([first, second])
        [job] = await opened[0].schedules()
        runs = await opened[0].recent(job.job)
    posted = [sent.plain for sent in tg.sent_to(GROUP_ID)]
    assert posted == ["Done: every day at 9.", NOTE]
    assert len(claude.requests) == 3  # one run in all
    assert [run.scheduled_for for run in runs] == [utc(2030, 1, 7, 8, 0)]
    # Both replicas watched the slot: the one that did not run it found it claimed.
    events = [line["event"] for line in logs]
    assert events.count("cron_run_started") == 1
    assert events.count("cron_slot_claimed_elsewhere") == 1


async def test_the_command_menus_offer_schedules_only_where_schedules_are_on(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    """People find /schedules in Telegram's command menus (setMyCommands), in private chats and
    groups alike (a job belongs to the chat it was set up in), as /help names it."""
    offered = {}
    for config, on in ((SCHEDULES, True), ("", False)):
        async with App(make_config(config), runs=ONE_HOST):
            offered[on] = {
                scope: [item["command"] for item in listed] for scope, listed in tg.menus.items()
            }
    assert offered[True] == {
        "all_private_chats": ["help", "compact", "memory", "forget", "usage", "schedules"],
        "all_group_chats": ["help", "memory", "forget", "schedules"],
        "default": ["help", "memory", "forget", "schedules"],
    }
    assert all("schedules" not in listed for listed in offered[False].values())
    assert claude.requests == []
