"""Scheduled posts end to end: the real host, store and SDKs against the fake Slack and model.

`bot cron run NAME` as a real subprocess posts into the fake Slack; scheduled ticks are driven by a
manual clock through the composed App; webhooks are called over the App's HTTP port.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import aiohttp
import pytest

from bot.cli import cron as cron_cli
from bot.cli.compose import App, Runs
from bot.cli.settings import Config, load_config
from bot.errors import ConfigError
from bot.ports.cron import CronRunStatus, CronTrigger
from bot.prompt import SILENT_TOKEN
from bot.store.sqlite.cron_runs import open_cron_runs
from channels.cron.scheduler import CronScheduler, SlotRules
from tests.channels.cron.doubles import ManualClock, utc
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

NEWS = "C0NEWS0001"
HOOK_TOKEN = "hook-token-0123456789abcdef"
MakeConfig = Callable[..., Config]


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.add_channel(NEWS, "news")
        yield fake


def environment(slack: FakeSlack, claude: FakeAnthropic) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": claude.base_url,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "HOOK_TOKEN": HOOK_TOKEN,
    }


@pytest.fixture
def make_config(agent_dir: Path, slack: FakeSlack, claude: FakeAnthropic) -> MakeConfig:
    """Slack on against the fake, plus `jobs` TOML; `env` adds environment overrides."""

    def make(jobs: str, **env: str) -> Config:
        write_config(
            agent_dir,
            f'[model]\nmax_retries = 0\n\n[slack]\nenabled = true\napi_url = "{slack.api_url}"\n\n'
            + jobs,
        )
        return load_config(agent_dir / "bot.toml", env={**environment(slack, claude), **env})

    return make


NEWS_JOB = f"""
[[cron.jobs]]
name = "news"
schedule = "0 9 * * 1-5"
timezone = "Europe/Berlin"
prompt = "Write the morning news note."
notify = "slack:{NEWS}"
"""


async def test_bot_cron_run_posts_the_answer_and_records_it_delivered(
    make_config: MakeConfig,
    slack: FakeSlack,
    claude: FakeAnthropic,
    agent_dir: Path,
    bot_command: list[str],
) -> None:
    config = make_config(NEWS_JOB)
    claude.script("Good morning, team! Three things today.")
    process = await asyncio.create_subprocess_exec(
        *bot_command,
        "--config",
        str(agent_dir / "bot.toml"),
        "cron",
        "run",
        "news",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**_clean_env(), **environment(slack, claude)},
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert out.decode().strip() == "news: delivered (1 part)"
    assert [(p["channel"], p["thread_ts"], p["text"]) for p in slack.posts] == [
        (NEWS, None, "Good morning, team! Three things today.")
    ]
    # The notify sentence and the silent token reached the model's session block.
    assert SILENT_TOKEN in json.dumps(claude.requests[0]["system"])
    runs = await open_cron_runs(config.settings.store.path, read_only=True)
    try:
        record = await runs.latest("news")
    finally:
        await runs.aclose()
    assert record is not None
    assert record.trigger is CronTrigger.MANUAL
    assert record.status is CronRunStatus.OK
    assert record.delivered is True


async def test_bot_cron_run_with_the_silent_token_posts_nothing_and_says_so(
    make_config: MakeConfig,
    slack: FakeSlack,
    claude: FakeAnthropic,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(NEWS_JOB)
    claude.script(SILENT_TOKEN)
    assert await cron_cli._run_now(config, "news") == 0
    assert printed(capsys).startswith("news: silent: nothing posted")
    assert slack.posts == []


async def test_bot_cron_run_works_with_the_config_bot_run_uses_for_slack_http_mode(
    make_config: MakeConfig,
    slack: FakeSlack,
    claude: FakeAnthropic,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # SPEC §7 Cron: `bot cron run NAME` runs one now, whatever mode Slack's events come in by.
    jobs = 'mode = "http"\n\n' + NEWS_JOB  # lands under [slack]
    config = make_config(jobs, SLACK_SIGNING_SECRET="signing-secret-0123", BOT_HTTP__ENABLED="true")
    claude.script("Posted by hand.")
    assert await cron_cli._run_now(config, "news") == 0
    assert printed(capsys) == "news: delivered (1 part)"
    assert [(p["channel"], p["text"]) for p in slack.posts] == [(NEWS, "Posted by hand.")]


async def test_a_delivery_failure_is_recorded_honestly(
    make_config: MakeConfig,
    slack: FakeSlack,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(NEWS_JOB.replace(NEWS, "C0GONE0001"))  # a channel Slack does not know
    assert await cron_cli._run_now(config, "news") == 1
    out = printed(capsys)
    assert out.startswith("news: not delivered: 0 of 1 parts accepted (")
    assert "channel_not_found" in out
    runs = await open_cron_runs(config.settings.store.path, read_only=True)
    try:
        record = await runs.latest("news")
    finally:
        await runs.aclose()
    assert record is not None
    assert record.status is CronRunStatus.UNDELIVERED
    assert record.delivered is False
    assert record.error is not None
    assert "channel_not_found" in record.error
    assert slack.posts == []


async def test_an_unknown_job_name_is_a_clear_error(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match=r"no job named 'nope' \(jobs: news\)"):
        await cron_cli._run_now(make_config(NEWS_JOB), "nope")


TEAM_CHAT = -1001234567890


async def test_bot_cron_run_posts_into_a_telegram_group_top_level(
    agent_dir: Path, claude: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeTelegram() as tg:
        tg.supergroup(TEAM_CHAT, "Team")
        write_config(
            agent_dir,
            f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
            + NEWS_JOB.replace(f"slack:{NEWS}", f"telegram:{TEAM_CHAT}"),
        )
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "TELEGRAM_BOT_TOKEN": tg.token,
        }
        # An update waiting for the running host's poller: `bot cron run` must leave it alone.
        alice = tg.user("Alice", "Chen", "alice")
        waiting = await tg.push(tg.message(tg.private_chat(alice), alice, "for the host"))
        claude.script("**Weekly** summary: all green.")
        assert await cron_cli._run_now(load_config(agent_dir / "bot.toml", env=env), "news") == 0
        sent = tg.sent_to(TEAM_CHAT)
        polled = [call for call in tg.calls if call.method == "getUpdates"]
    assert printed(capsys) == "news: delivered (1 part)"
    assert [(m.plain, m.reply_to, m.thread_id) for m in sent] == [
        ("Weekly summary: all green.", None, None)
    ]
    assert polled == []
    assert tg.pending_updates == [waiting]


async def test_a_telegram_refusal_is_recorded_with_its_reason_and_not_posted_again(
    agent_dir: Path, claude: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    # SPEC §7 Cron: the run record says delivered or not, and why; a part Telegram refuses with a
    # 400 (the bot is not in that chat) is refused for good, not left to be posted at each start.
    async with FakeTelegram() as tg:
        write_config(
            agent_dir,
            f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
            + NEWS_JOB.replace(f"slack:{NEWS}", f"telegram:{TEAM_CHAT}"),  # a chat it is not in
        )
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "TELEGRAM_BOT_TOKEN": tg.token,
        }
        config = load_config(agent_dir / "bot.toml", env=env)
        claude.script("Nobody will read this.")
        assert await cron_cli._run_now(config, "news") == 1
        out = printed(capsys)
        async with App(config, runs=Runs(http=False, scheduler=False)) as app:
            await app.host.idle()  # a start posts what the outbox still holds
        sends = [call for call in tg.calls if call.method == "sendMessage"]
    assert out.startswith("news: not delivered: 0 of 1 parts accepted (")
    assert "chat not found" in out.lower()
    assert len(sends) == 1, "a refused part is not posted again at the next start"


SHARED_JOBS = f"""
[[cron.jobs]]
name = "morning"
schedule = "0 9 * * *"
timezone = "Europe/Berlin"
prompt = "Morning check-in: what is planned today?"
conversation_id = "team-log"
notify = "slack:{NEWS}"

[[cron.jobs]]
name = "evening"
schedule = "0 18 * * *"
timezone = "Europe/Berlin"
prompt = "Evening check-in: what got done?"
conversation_id = "team-log"
"""


async def test_scheduled_ticks_post_through_slack_and_share_one_history(
    make_config: MakeConfig, slack: FakeSlack, claude: FakeAnthropic
) -> None:
    config = make_config(SHARED_JOBS)
    claude.script("Plan: ship the release.", "Done: the release shipped.")
    clock = ManualClock(utc(2024, 6, 3, 6, 0))  # 08:00 in Berlin
    async with App(config, runs=Runs(http=False, scheduler=False)) as app:
        assert app.cron is None
        assert app.cron_runner is not None
        runs = await open_cron_runs(app.store.db.path)
        scheduler = CronScheduler(
            app.cron_jobs,
            app.cron_runner,
            runs,
            SlotRules(300, 0, 30),
            now=clock.now,
            sleep=clock.sleep,
        )
        await scheduler.start()
        try:
            await clock.advance(3600)  # 09:00 Berlin: morning
            await scheduler.idle()
            await clock.advance(9 * 3600)  # 18:00 Berlin: evening
            await scheduler.idle()
            history = await app.store.history.load("team-log")
            morning = await runs.latest("morning")
            evening = await runs.latest("evening")
        finally:
            await scheduler.stop()
            await runs.aclose()
    assert [(p["channel"], p["text"]) for p in slack.posts] == [(NEWS, "Plan: ship the release.")]
    assert [entry.text for entry in history] == [
        "Morning check-in: what is planned today?",
        "Plan: ship the release.",
        "Evening check-in: what got done?",
        "Done: the release shipped.",
    ]
    # The evening turn saw the morning exchange as prior messages.
    evening_request = json.dumps(claude.requests[1]["messages"])
    assert "Plan: ship the release." in evening_request
    assert morning is not None
    assert morning.scheduled_for == utc(2024, 6, 3, 7, 0)
    assert morning.delivered is True
    assert evening is not None
    assert evening.status is CronRunStatus.OK
    assert evening.delivered is False  # no notify: history only
    assert evening.scheduled_for == morning.scheduled_for + timedelta(hours=9)


async def test_the_app_runs_its_scheduler_when_jobs_exist_and_stops_it_on_exit(
    make_config: MakeConfig,
) -> None:
    async with App(make_config(NEWS_JOB), runs=Runs(http=False)) as app:
        scheduler = app.cron
        assert scheduler is not None
        next_fire = scheduler.next_fire("news")
        assert next_fire is not None
        assert next_fire.astimezone(ZoneInfo("Europe/Berlin")).hour == 9
    assert scheduler.running("news") is False


async def test_a_notify_to_a_disabled_channel_stops_start_up(make_config: MakeConfig) -> None:
    config = make_config(NEWS_JOB.replace(f"slack:{NEWS}", "telegram:-1001234567890"))
    with pytest.raises(ConfigError, match="telegram channel is not enabled"):
        async with App(config, runs=Runs(http=False)):
            pass


WEBHOOK = f"""
[[webhooks]]
name = "deploy"
token_env = "HOOK_TOKEN"
prompt_template = "A deploy event arrived; post a one-line summary.\\n{{body}}"
notify = "slack:{NEWS}"
"""


async def test_a_webhook_call_posts_a_summary_through_slack(
    make_config: MakeConfig, slack: FakeSlack, claude: FakeAnthropic
) -> None:
    config = make_config(WEBHOOK, BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    claude.script("Deployed v2.1 to production.")
    async with App(config) as app:
        assert app.webhooks is not None
        url = f"http://127.0.0.1:{app.http_port}/hooks/deploy"
        async with aiohttp.ClientSession() as session:
            refused = await session.post(url, data=b"{}", headers={"Authorization": "Bearer no"})
            accepted = await session.post(
                url,
                data=b'{"version": "2.1", "env": "production"}',
                headers={"Authorization": f"Bearer {HOOK_TOKEN}"},
            )
            body = await accepted.json()
        await app.webhooks.idle()
        runs = await open_cron_runs(app.store.db.path, read_only=True)
        try:
            record = await runs.latest("webhook:deploy")
        finally:
            await runs.aclose()
    assert refused.status == 401
    assert accepted.status == 202
    assert len(claude.requests) == 1
    user_text = json.dumps(claude.requests[0]["messages"][-1])
    assert '\\"version\\": \\"2.1\\"' in user_text
    assert [(p["channel"], p["text"]) for p in slack.posts] == [
        (NEWS, "Deployed v2.1 to production.")
    ]
    assert record is not None
    assert record.run_id == body["run_id"]
    assert record.delivered is True


def printed(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's own last line of output (the test process's logs share stdout)."""
    return capsys.readouterr().out.strip().splitlines()[-1]


def _clean_env() -> dict[str, str]:
    """The test process's environment without anything that would steer the child's config."""
    keep = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k in keep}


async def test_a_scheduled_run_that_keeps_calling_one_tool_is_stopped_and_told_once(
    make_config: MakeConfig, slack: FakeSlack, claude: FakeAnthropic
) -> None:
    # SPEC §17: the fourth identical tool call never runs; the job pauses; the channel hears once.
    from bot import replies
    from tests.fakes.anthropic import Reply, ToolCall

    config = make_config(NEWS_JOB)
    loop = Reply(tool_calls=[ToolCall("memory_recall", {"query": "open tickets"})])
    claude.script(*[loop for _ in range(8)])
    clock = ManualClock(utc(2024, 6, 3, 6, 0))  # Monday 08:00 in Berlin
    async with App(config, runs=Runs(http=False, scheduler=False)) as app:
        assert app.cron_runner is not None
        runs = await open_cron_runs(app.store.db.path)
        scheduler = CronScheduler(
            app.cron_jobs,
            app.cron_runner,
            runs,
            SlotRules(300, 2, 30),
            now=clock.now,
            sleep=clock.sleep,
        )
        await scheduler.start()
        try:
            await clock.advance(3600)  # 09:00: the run loops
            await scheduler.idle()
            calls_after_first = len(claude.requests)
            await clock.advance(24 * 3600)  # Tuesday 09:00: paused
            await scheduler.idle()
            record = await runs.latest("news")
            pauses = await runs.paused()
        finally:
            await scheduler.stop()
            await runs.aclose()
    assert calls_after_first == 4  # three rounds ran the tool, the fourth ask stopped the run
    assert len(claude.requests) == calls_after_first
    assert [(p["channel"], p["text"]) for p in slack.posts] == [
        (NEWS, replies.job_paused("news", "repeat"))
    ]
    assert record is not None
    assert record.status is CronRunStatus.STOPPED
    assert (record.error or "").startswith("breaker:repeat")
    assert [(p.job, p.reason) for p in pauses] == [("news", "repeat")]
    # `bot cron resume news` lifts it; a second resume says it was not paused.
    assert await cron_cli._resume(config, "news") == 0
    assert await cron_cli._resume(config, "news") == 1
