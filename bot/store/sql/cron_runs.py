"""What both engines' cron and webhook run records and chat schedules share
(`bot.store.sqlite.cron_runs`, `bot.store.postgres.cron_runs`): their bounds, and a run (or a
schedule) as its table's columns and back. Times are unix seconds in both schemas."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

from bot.ports.cron import ChatSchedule, CronRun, CronRunStatus, CronTrigger, JobPause
from bot.store.sql.request_codec import decode_route, encode_route

DEFAULT_KEEP_PER_JOB = 200
DEFAULT_MAX_AGE_DAYS = 90.0
INTERRUPTED_ERROR = "the process stopped before the run finished"

COLUMNS = (
    "run_id, job, trigger, attempt, scheduled_for, fired_at, finished_at, status, delivered, "
    "parts, accepted, error"
)


def run_row(run: CronRun) -> tuple[object, ...]:
    return (
        run.run_id,
        run.job,
        run.trigger.value,
        run.attempt,
        run.scheduled_for.timestamp() if run.scheduled_for else None,
        run.fired_at.timestamp(),
        run.finished_at.timestamp() if run.finished_at else None,
        run.status.value,
        int(run.delivered),
        run.parts,
        run.accepted,
        run.error,
    )


def stored_run(row: Iterable[object]) -> CronRun:
    (run_id, job, trigger, attempt, scheduled, fired, finished, status, delivered, parts,
     accepted, error) = tuple(row)  # fmt: skip
    return CronRun(
        run_id=str(run_id),
        job=str(job),
        trigger=CronTrigger(str(trigger)),
        attempt=int(str(attempt)),
        scheduled_for=stored_time(scheduled),
        fired_at=stored_time(fired) or datetime.fromtimestamp(0, UTC),
        finished_at=stored_time(finished),
        status=CronRunStatus(str(status)),
        delivered=bool(delivered),
        parts=int(str(parts)),
        accepted=int(str(accepted)),
        error=None if error is None else str(error),
    )


def stored_time(value: object) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(float(str(value)), UTC)


def stored_pause(row: Iterable[object]) -> JobPause:
    job, reason, paused_at = tuple(row)
    return JobPause(str(job), str(reason), stored_time(paused_at) or datetime.fromtimestamp(0, UTC))


SCHEDULE_COLUMNS = "id, place, route, creator, expression, timezone, prompt, created_at, tools"


def schedule_row(schedule: ChatSchedule) -> tuple[object, ...]:
    return (
        schedule.id,
        schedule.place,
        encode_route(schedule.route),
        schedule.creator,
        schedule.expression,
        schedule.timezone,
        schedule.prompt,
        schedule.created_at.timestamp(),
        json.dumps(list(schedule.tools)),
    )


def stored_schedule(row: Iterable[object]) -> ChatSchedule:
    ident, place, route, creator, expression, timezone, prompt, created, tools = tuple(row)
    return ChatSchedule(
        id=str(ident),
        place=str(place),
        route=decode_route(str(route)),
        creator=str(creator),
        expression=str(expression),
        timezone=str(timezone),
        prompt=str(prompt),
        created_at=stored_time(created) or datetime.fromtimestamp(0, UTC),
        tools=_tool_names(tools),
    )


def _tool_names(stored: object) -> tuple[str, ...]:
    """A schedule's tools; a value this program cannot read offers none."""
    try:
        names = json.loads(str(stored))
    except ValueError:
        return ()
    if not isinstance(names, list):
        return ()
    return tuple(name for name in names if isinstance(name, str))
