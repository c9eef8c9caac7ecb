"""A job made with the `schedule` tool runs with the tools its creator's place offered when it
was made (SPEC §17), never those of the `platform = "cron"` rule: through the whole App, the fake
Slack and the notes server, a DM offered only `schedule` sets up a job whose run is offered no
server tool, though the cron rule offers every one."""

from __future__ import annotations

from typing import Any

from bot.cli.compose import App, Runs
from channels.cron.chat import job_plans
from channels.cron.scheduler import CronScheduler, SlotRules
from tests.channels.cron.doubles import ManualClock, utc
from tests.channels.slack.conftest import ALICE, DM, GENERAL
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, server_toml

RULES = f"""
[schedules]
allowed = ["slack:{ALICE}"]
timezone = "UTC"

[[surfaces]]
platform = "slack"
kind = "dm"
tools = ["schedule"]

[[surfaces]]
platform = "slack"
id = "{GENERAL}"
tools = ["schedule", "notes__search"]

[[surfaces]]
platform = "cron"
tools = ["notes__*", "memory_recall"]
"""
CREATE = Reply(
    tool_calls=[
        ToolCall("schedule", {"action": "create", "when": "daily at 9", "prompt": "Add a note."})
    ]
)
ADD = Reply(tool_calls=[ToolCall("notes__add", {"text": "from a job"})])


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


async def run_jobs_once(app: App) -> None:
    """Every stored chat schedule's 09:00 run, on a manual clock."""
    records = await app.store.cron_runs()
    assert app.cron_runner is not None
    clock = ManualClock(utc(2030, 1, 7, 8, 0))
    scheduler = CronScheduler(
        app.cron_jobs,
        app.cron_runner,
        records,
        SlotRules(300, 0, 30),
        now=clock.now,
        sleep=clock.sleep,
        source=lambda: job_plans(records),
        refresh=86_400,
    )
    await scheduler.start()
    try:
        await clock.advance(3600)
        await scheduler.idle()
        await app.host.idle()
    finally:
        await scheduler.stop()
        await records.aclose()


async def test_a_job_set_up_in_a_dm_offered_only_schedule_gets_no_server_tool(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    claude.script(CREATE, "Set up.", ADD, "I cannot add notes here.")
    config = make_mcp_config(server_toml() + RULES)
    async with App(config, runs=Runs(http=False, scheduler=False)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "every day at 9 add a note"))
        await run_jobs_once(app)
    assert tool_names(claude.requests[0]) == ["schedule"]
    run = claude.requests[2]
    assert not any(name.startswith("notes__") for name in tool_names(run))
    assert "add" not in call_log.tools()  # the call the model made anyway was refused


async def test_a_job_set_up_in_a_channel_gets_that_channels_tools_and_no_more(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    search = Reply(tool_calls=[ToolCall("notes__search", {"query": "milk"})])
    claude.script(CREATE, "Set up.", search, "No milk notes.")
    config = make_mcp_config(server_toml() + RULES)
    async with App(config, runs=Runs(http=False, scheduler=False)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "every day at 9 look for milk"))
        await run_jobs_once(app)
    assert tool_names(claude.requests[2]) == ["schedule", "notes__search"]
    assert call_log.tools() == ["search"]
