"""Schedules from chat through the whole App and the fake Slack (SPEC §17): a person allowed by
`[schedules] allowed` asks for a job in a channel; `/schedules` lists it; at its time it posts
once, through the outbox, in the conversation it was asked in. Everyone else is refused politely,
and the tool is offered only where a surface rule's `tools` allows it."""

from __future__ import annotations

import json
from typing import Any

from bot import replies
from bot.cli.compose import App, Runs
from channels.cron.chat import job_plans
from channels.cron.scheduler import CronScheduler, SlotRules
from tests.channels.cron.doubles import ManualClock, utc
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, MakeConfig
from tests.channels.slack.test_commands import command, hooks
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack

SCHEDULES = f"""
[schedules]
allowed = ["slack:{ALICE}"]
timezone = "Europe/Berlin"

[[surfaces]]
platform = "slack"
tools = ["schedule", "memory_recall"]
"""
ASK = "Post a summary here every weekday at 9"
CREATE = Reply(
    tool_calls=[
        ToolCall(
            "schedule",
            {"action": "create", "when": "every weekday at 9", "prompt": "Post a summary."},
        )
    ]
)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]["content"]
    return [block for block in last if block.get("type") == "tool_result"]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


async def test_a_job_asked_for_in_a_channel_is_listed_and_posts_once_at_its_time(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script(CREATE, "Done: a summary here every weekday at 9.", "Summary: 3 open tickets.")
    config = make_config(SCHEDULES)
    async with App(config, runs=Runs(http=False, scheduler=False)) as app:
        asked = slack.mention(GENERAL, ALICE, ASK)
        await send(slack, app, asked)
        await send(slack, app, slack.mention(GENERAL, ALICE, "/schedules"))
        records = await app.store.cron_runs()
        [job] = await records.schedules()
        assert app.cron_runner is not None
        clock = ManualClock(utc(2030, 1, 7, 6, 0))  # Monday 07:00 in Berlin
        scheduler = CronScheduler(
            app.cron_jobs,
            app.cron_runner,
            records,
            SlotRules(300, 0, 30),
            now=clock.now,
            sleep=clock.sleep,
            source=lambda: job_plans(records),
            refresh=86_400,  # read at start only: a read is I/O the manual clock cannot wait for
        )
        await scheduler.start()
        try:
            await clock.advance(2 * 3600)  # 09:00 Berlin: the job runs
            await scheduler.idle()
            await app.host.idle()
            await clock.advance(3600)  # 10:00: nothing more until tomorrow
            await scheduler.idle()
            run = await records.latest(job.job)
        finally:
            await scheduler.stop()
            await records.aclose()
    assert "schedule" in tool_names(claude.requests[0])
    [result] = tool_results(claude.requests[1])
    assert f"Scheduled job {job.id}" in result["content"]
    assert (job.place, job.expression, job.timezone) == (
        f"slack:{GENERAL}",
        "0 9 * * 1-5",
        "Europe/Berlin",
    )
    texts = [post["text"] for post in slack.posts]
    assert texts[0] == "Done: a summary here every weekday at 9."
    assert job.id in texts[1]
    assert "0 9 * * 1-5 (Europe/Berlin) (yours): Post a summary." in texts[1]
    # The run posts once, in the conversation the job was asked in, through the outbox.
    summaries = [p for p in slack.posts if p["text"] == "Summary: 3 open tickets."]
    assert [(p["channel"], p["thread_ts"]) for p in summaries] == [(GENERAL, asked["event"]["ts"])]
    assert run is not None
    assert run.delivered is True
    assert run.scheduled_for == utc(2030, 1, 7, 8, 0)
    # The run's request names no channel, thread or user id.
    run_request = json.dumps(claude.requests[2])
    assert GENERAL not in run_request
    assert asked["event"]["ts"] not in run_request


async def test_a_person_not_allowed_is_refused_politely_and_nothing_is_stored(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script(CREATE, "Sorry, I can't set that up for you.")
    async with App(make_config(SCHEDULES), runs=Runs(http=False, scheduler=False)) as app:
        await send(slack, app, slack.mention(GENERAL, BOB, ASK))
        records = await app.store.cron_runs()
        stored = await records.schedules()
        await records.aclose()
    [result] = tool_results(claude.requests[1])
    assert result["is_error"] is True
    assert result["content"] == replies.SCHEDULE_NOT_ALLOWED
    assert stored == []


async def test_only_the_creator_or_an_operator_removes_a_job(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script(CREATE, "Done.")
    async with App(make_config(SCHEDULES), runs=Runs(http=False, scheduler=False)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, ASK))
        records = await app.store.cron_runs()
        [job] = await records.schedules()
        await send(slack, app, slack.mention(GENERAL, BOB, f"/schedules remove {job.id}"))
        await send(slack, app, slack.mention(GENERAL, ALICE, "/schedules remove nope"))
        await send(slack, app, slack.mention(GENERAL, ALICE, f"/schedules remove {job.id}"))
        await send(slack, app, slack.mention(GENERAL, ALICE, "/schedules"))
        left = await records.schedules()
        await records.aclose()
    texts = [post["text"] for post in slack.posts][1:]
    assert texts[0] == replies.SCHEDULE_NOT_YOURS
    assert texts[1].startswith('There is no scheduled job "nope" here')
    assert texts[2] == replies.SCHEDULE_REMOVED.format(id=job.id)
    assert texts[3] == replies.SCHEDULES_NONE
    assert left == []
    assert len(claude.requests) == 2  # the commands cost no model call


async def test_the_tool_is_offered_only_where_a_surface_rule_allows_it(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("Hello.")
    without_rule = SCHEDULES.split("[[surfaces]]")[0]
    async with App(make_config(without_rule), runs=Runs(http=False, scheduler=False)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, ASK))
    assert "schedule" not in tool_names(claude.requests[0])


async def test_help_names_the_schedules_command_only_where_schedules_are_on(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    """People learn the commands from /help: with `[schedules] allowed` set it names
    /schedules (as it names /memory), without it it does not."""
    for config, shown in ((SCHEDULES, True), ("", False)):
        slack.posts.clear()
        async with App(make_config(config), runs=Runs(http=False, scheduler=False)) as app:
            await send(slack, app, slack.mention(GENERAL, ALICE, "/help"))
        [help_post] = slack.posts
        assert "/memory" in help_post["text"]
        assert ("/schedules" in help_post["text"]) is shown
    assert claude.requests == []  # /help costs no model call


async def test_schedules_is_a_slash_command_answered_privately_in_a_dm(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    """Slack's client takes `/schedules` typed in a DM as a slash command, so the app registers it
    as one (SPEC §7, §17): it lists the DM's jobs and removes one, only the person sees the
    answer, and no model call is made."""
    claude.script(CREATE, "Done: a summary here every weekday at 9.")
    async with App(
        make_config(hooks(slack) + SCHEDULES), runs=Runs(http=False, scheduler=False)
    ) as app:
        await send(slack, app, slack.dm(DM, ALICE, ASK))
        records = await app.store.cron_runs()
        [job] = await records.schedules()
        posts = len(slack.posts)
        listed = await command(
            slack, app, slack.slash_command("/schedules", "", channel=DM, user=ALICE)
        )
        elsewhere = await command(
            slack, app, slack.slash_command("/schedules", "", channel=GENERAL, user=ALICE)
        )
        removed = await command(
            slack,
            app,
            slack.slash_command("/schedules", f"remove {job.id}", channel=DM, user=ALICE),
        )
        left = await records.schedules()
        await records.aclose()
    assert job.place == f"slack:{DM}"
    assert job.id in listed
    assert "(yours): Post a summary." in listed
    assert elsewhere == replies.SCHEDULES_NONE  # #general's jobs, not the DM's
    assert removed == replies.SCHEDULE_REMOVED.format(id=job.id)
    assert left == []
    assert len(slack.posts) == posts, "nothing is posted for everyone to see"
    assert len(claude.requests) == 2  # the job's creation only: the commands cost no model call
    assert all(body.get("response_type") == "ephemeral" for _, body in slack.responses)


async def test_the_schedules_slash_command_says_when_schedules_are_off(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(hooks(slack)), runs=Runs(http=False, scheduler=False)) as app:
        answer = await command(
            slack, app, slack.slash_command("/schedules", "", channel=DM, user=ALICE)
        )
    assert answer == replies.SCHEDULES_OFF
    assert claude.requests == []
