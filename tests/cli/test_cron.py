"""`bot cron list`: every job with its next fire time on its own clock, and its last outcome."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from bot.cli import cron as cron_cli
from bot.cli.settings import load_config
from bot.config import MemorySettings, StoreSettings
from bot.ports.cron import CronRun, CronRunStatus, CronTrigger
from bot.store.sqlite import open_store
from bot.store.sqlite.cron_runs import open_cron_runs
from tests.channels.cron.doubles import utc
from tests.conftest import write_config

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "bot.toml"
NOW = utc(2024, 6, 2, 12)  # a Sunday

JOBS = """
[[cron.jobs]]
name = "standup"
schedule = "0 9 * * 1-5"
timezone = "Europe/Berlin"
prompt = "Write the standup note."

[[cron.jobs]]
name = "tokyo-report"
schedule = "30 18 * * *"
timezone = "Asia/Tokyo"
prompt = "Write the evening report."
enabled = false
"""


async def test_the_example_config_lists_every_jobs_next_fire_on_its_own_clock(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = load_config(EXAMPLE, env={})
    assert config.settings.cron.jobs, "the example config should show a job"
    assert await cron_cli._list(config, NOW) == 0
    out = capsys.readouterr().out
    for job in config.settings.cron.jobs:
        zone = ZoneInfo(job.timezone)
        wall = croniter(job.schedule, NOW.astimezone(zone).replace(tzinfo=None)).get_next(datetime)
        expected = wall.replace(tzinfo=zone).strftime("%a %Y-%m-%d %H:%M %Z (UTC%z)")
        assert f"{job.name}  [{job.schedule}]  {job.timezone}" in out
        assert expected in out


async def test_list_shows_paused_jobs_and_the_last_outcome(
    agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(agent_dir, JOBS)
    config = load_config(agent_dir / "bot.toml", env={})
    store = await open_store(StoreSettings(path=config.settings.store.path), MemorySettings())
    await store.aclose()
    runs = await open_cron_runs(config.settings.store.path)
    await runs.save(
        CronRun(
            run_id="r1",
            job="standup",
            trigger=CronTrigger.SCHEDULE,
            fired_at=utc(2024, 5, 31, 7),
            status=CronRunStatus.UNDELIVERED,
            parts=2,
            accepted=1,
            error="ratelimited",
        )
    )
    await runs.aclose()
    assert await cron_cli._list(config, NOW) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "standup  [0 9 * * 1-5]  Europe/Berlin",
        "  next:   enabled Mon 2024-06-03 09:00 CEST (UTC+0200) (in 19h 0m)",
        "  notify: none (the answer goes to history only)",
        "  last:   not delivered: 1 of 2 parts accepted (ratelimited)"
        " (fired Fri 2024-05-31 09:00 CEST (UTC+0200))",
        "tokyo-report  [30 18 * * *]  Asia/Tokyo",
        "  next:   paused (enabled = false): would fire Mon 2024-06-03 18:30 JST (UTC+0900)"
        " (in 21h 30m)",
        "  notify: none (the answer goes to history only)",
        "  last:   never run",
    ]


async def test_list_without_jobs_says_how_to_add_one(
    agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(agent_dir / "bot.toml", env={})
    assert await cron_cli._list(config, NOW) == 0
    assert "No jobs" in capsys.readouterr().out


async def test_list_shows_a_job_a_cost_breaker_paused_and_how_to_resume_it(
    agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(agent_dir, JOBS)
    config = load_config(agent_dir / "bot.toml", env={})
    store = await open_store(StoreSettings(path=config.settings.store.path), MemorySettings())
    await store.aclose()
    runs = await open_cron_runs(config.settings.store.path)
    assert await runs.pause("standup", "run", utc(2024, 5, 31, 7)) is True
    assert await runs.pause("standup", "run", utc(2024, 5, 31, 8)) is False
    await runs.aclose()
    assert await cron_cli._list(config, NOW) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "  next:   paused by a cost breaker (run; `bot cron resume standup`): would fire "
        "Mon 2024-06-03 09:00 CEST (UTC+0200) (in 19h 0m)"
    )
    assert await cron_cli._resume(config, "standup") == 0
    assert await cron_cli._resume(config, "standup") == 1


async def test_list_shows_jobs_set_up_in_chat_beside_the_configured_ones(
    agent_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.ports.cron import ChatSchedule
    from bot.turns import ReplyRoute

    write_config(agent_dir, JOBS)
    config = load_config(agent_dir / "bot.toml", env={})
    store = await open_store(StoreSettings(path=config.settings.store.path), MemorySettings())
    await store.aclose()
    runs = await open_cron_runs(config.settings.store.path)
    route = ReplyRoute("slack", {"channel": "C0SECRET1", "thread_ts": "17.5"})
    made = ChatSchedule(
        "ab12cd34", "slack:C0SECRET1", route, "slack:T1:U1", "0 9 * * 1-5", "Europe/Berlin",
        "Post a summary.", utc(2024, 5, 31, 7),
    )  # fmt: skip
    assert await runs.add_schedule(made, per_place=5, per_person=5) == ""
    await runs.aclose()
    assert await cron_cli._list(config, NOW) == 0
    out = capsys.readouterr().out
    assert (
        "schedule:ab12cd34  [0 9 * * 1-5]  Europe/Berlin  (set up in chat at slack:C0SECRET1)"
        in out
    )
    assert "  next:   enabled Mon 2024-06-03 09:00 CEST (UTC+0200) (in 19h 0m)" in out
    assert "  does:   Post a summary." in out
    assert "17.5" not in out  # the route stays host-side
