"""`bot cron`: list the scheduled jobs (next fire time, last outcome), run one now, or resume one
a cost breaker paused."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.ports.cron import ChatSchedule, CronRun, CronRunStatus, CronTrigger

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config


HELP = "list scheduled jobs or run one now"
WEBHOOK_PREFIX = "webhook:"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="each job with its next fire time and last outcome")
    run = actions.add_parser("run", help="run one job now and say whether its answer was posted")
    run.add_argument("name", metavar="NAME", help="the job's name from [[cron.jobs]]")
    resume = actions.add_parser("resume", help="resume a job a cost breaker paused")
    resume.add_argument("name", metavar="NAME", help="the job's name, as `bot cron list` shows")


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    if args.action == "list":
        return asyncio.run(_list(config, datetime.now(UTC)))
    if args.action == "resume":
        return asyncio.run(_resume(config, args.name))
    _quiet_logs(config)
    return asyncio.run(_run_now(config, args.name))


# --- bot cron list ------------------------------------------------------------------------------


async def _list(config: Config, now: datetime) -> int:
    from channels.cron.plan import plan_jobs

    settings = config.settings
    jobs = plan_jobs(settings.cron, settings.platforms())
    hooks = [hook.name for hook in settings.webhooks]
    chat = await _chat_schedules(config)
    if not jobs and not hooks and not chat:
        print("No jobs: add [[cron.jobs]] entries to the config (see README, Scheduled posts).")
        return 0
    names = [job.name for job in jobs] + [WEBHOOK_PREFIX + hook for hook in hooks]
    last, pauses = await _latest_runs(names + [item.job for item in chat], config)
    for job in jobs:
        fire = job.schedule.next_after(now)
        state = "enabled" if job.enabled else "paused (enabled = false): would fire"
        if job.name in pauses:
            state = f"paused by a cost breaker ({pauses[job.name]}; `bot cron resume {job.name}`)"
            state += ": would fire"
        print(f"{job.name}  [{job.schedule.expression}]  {job.schedule.timezone}")
        print(f"  next:   {state} {_local(job.schedule.local(fire))} ({_until(fire - now)})")
        print(f"  notify: {job.run.notify or 'none (the answer goes to history only)'}")
        print(f"  last:   {_outcome(last.get(job.name), job.schedule.timezone)}")
    for item in chat:
        _print_chat_schedule(item, now, last.get(item.job), pauses.get(item.job))
    for hook in hooks:
        print(f"webhook {hook}  POST /hooks/{hook}")
        print(f"  last:   {_outcome(last.get(WEBHOOK_PREFIX + hook), 'UTC')}")
    return 0


def _print_chat_schedule(
    item: ChatSchedule, now: datetime, last: CronRun | None, paused: str | None
) -> None:
    """A job set up in chat, beside the configured ones (where it posts stays unshown: a route)."""
    from channels.cron.schedule import Schedule

    schedule = Schedule.parse(item.expression, item.timezone)
    fire = schedule.next_after(now)
    state = "enabled"
    if paused is not None:
        state = f"paused by a cost breaker ({paused}; `bot cron resume {item.job}`): would fire"
    print(f"{item.job}  [{item.expression}]  {item.timezone}  (set up in chat at {item.place})")
    print(f"  next:   {state} {_local(schedule.local(fire))} ({_until(fire - now)})")
    print(f"  does:   {' '.join(item.prompt.split())[:100]}")
    print(f"  last:   {_outcome(last, item.timezone)}")


async def _chat_schedules(config: Config) -> list[ChatSchedule]:
    """The jobs set up in chat, read-only; none when the store was never created."""
    from bot.cli.stored import open_configured

    settings = config.settings
    if not settings.store.url and not settings.store.path.expanduser().is_file():
        return []
    store = await open_configured(settings.store, settings.memory, read_only=True)
    try:
        runs = await store.cron_runs(read_only=True)
        try:
            return await runs.schedules()
        finally:
            await runs.aclose()
    finally:
        await store.aclose()


async def _latest_runs(
    names: list[str], config: Config
) -> tuple[dict[str, CronRun], dict[str, str]]:
    """The latest record of each name and the paused jobs (with the breaker that paused them),
    read-only; none when the store was never created."""
    from bot.cli.stored import open_configured

    settings = config.settings
    if not settings.store.url and not settings.store.path.expanduser().is_file():
        return {}, {}
    store = await open_configured(settings.store, settings.memory, read_only=True)
    try:
        runs = await store.cron_runs(read_only=True)
        try:
            found = {name: await runs.latest(name) for name in names}
            pauses = {pause.job: pause.reason for pause in await runs.paused()}
        finally:
            await runs.aclose()
    finally:
        await store.aclose()
    return {name: record for name, record in found.items() if record is not None}, pauses


# --- bot cron resume NAME -----------------------------------------------------------------------


async def _resume(config: Config, name: str) -> int:
    from bot.cli.stored import open_configured

    settings = config.settings
    store = await open_configured(settings.store, settings.memory)
    try:
        runs = await store.cron_runs()
        try:
            resumed = await runs.resume(name)
            paused = [pause.job for pause in await runs.paused()]
        finally:
            await runs.aclose()
    finally:
        await store.aclose()
    if resumed:
        print(f"{name}: resumed; it runs again at its next slot.")
        return 0
    known = ", ".join(paused) or "none"
    print(f"{name}: not paused (paused jobs: {known}).", file=sys.stderr)
    return 1


def _local(moment: datetime) -> str:
    return moment.strftime("%a %Y-%m-%d %H:%M %Z (UTC%z)")


def _until(delta: timedelta) -> str:
    minutes = max(int(delta.total_seconds() // 60), 0)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m"]
    return "in " + " ".join(p for p in parts if p)


def _outcome(record: CronRun | None, timezone: str) -> str:
    from zoneinfo import ZoneInfo

    from channels.cron.runs import describe

    if record is None:
        return "never run"
    when = _local(record.fired_at.astimezone(ZoneInfo(timezone)))
    how = "" if record.trigger is CronTrigger.SCHEDULE else f", {record.trigger.value}"
    return f"{describe(record)} (fired {when}{how})"


# --- bot cron run NAME --------------------------------------------------------------------------


async def _run_now(config: Config, name: str) -> int:
    from bot.cli.compose import CRON_RUN, App
    from channels.cron.runs import describe

    async with App(config, runs=CRON_RUN) as app:
        job = next((job for job in app.cron_jobs if job.name == name), None)
        if job is None or app.cron_runner is None:
            known = ", ".join(job.name for job in app.cron_jobs) or "none configured"
            raise ConfigError(
                f"cron: no job named {name!r} (jobs: {known}). Fix: use a name from "
                "`bot cron list`."
            )
        where = f" to {job.run.notify}" if job.run.notify else ""
        print(f"Running {job.name}{where}...", file=sys.stderr)
        result = await app.cron_runner.run(job.run, job.prompt, trigger=CronTrigger.MANUAL)
    record = result.record
    print(f"{job.name}: {describe(record)}")
    if record.status is CronRunStatus.OK and job.run.notify is None and result.text:
        print(result.text)
    print(f"run id {record.run_id}", file=sys.stderr)
    succeeded = record.status in {CronRunStatus.OK, CronRunStatus.SILENT}
    return 0 if succeeded else 1


def _quiet_logs(config: Config) -> None:
    """The outcome is this command's output: only warnings and errors go to stderr."""
    from bot.config import LoggingSettings
    from bot.logs import configure_logging

    level = config.settings.logging.level
    quiet = LoggingSettings(level=level if level in {"warning", "error"} else "warning")
    configure_logging(quiet, secrets=config.secrets)
