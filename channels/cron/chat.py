"""Schedules from chat (SPEC §17): the `schedule` tool, and chat schedules as scheduler jobs.

People listed in `[schedules] allowed` may ask the agent to create, list and remove the jobs of
the place they are in (a Slack channel, a Telegram group, a DM); everyone else is refused
politely. A job's runs post in the conversation it was set up in: its route is taken from the
turn, host-side, so the model never sees or chooses where anything goes. Bounds: jobs per place,
jobs per person, and a minimum interval between two runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from bot import replies
from bot.errors import ScheduleError, ToolError
from bot.ports.cron import ChatSchedule, ChatSchedules
from bot.ports.tools import Tool, ToolSpec
from bot.turns import TurnRequest
from channels.cron.phrases import to_cron
from channels.cron.plan import JobPlan, RunPlan
from channels.cron.runner import Clock, utc_now
from channels.cron.schedule import Schedule
from channels.cron.settings import SchedulesSettings

log = structlog.get_logger(__name__)

PROMPT_MAX_CHARS = 2000
INTERVAL_SAMPLE = 200  # fire times looked at for the minimum interval
LISTED_PROMPT_CHARS = 120

SCHEDULE_SPEC = ToolSpec(
    name="schedule",
    description=(
        "Create, list or remove scheduled jobs of this conversation's place. A job runs the "
        "given instruction at its times and posts the answer here. `when` is a plain time "
        "('every weekday at 9', 'every Monday at 17:30', 'daily at 8am') or a five-field cron "
        "expression, read in the host's time zone. Use action 'list' to see the jobs and their "
        "ids, 'remove' with an id to delete one. Where the answer goes is fixed by the host."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["create", "list", "remove"]},
            "when": {"type": "string", "description": "for create: when it runs"},
            "prompt": {"type": "string", "description": "for create: what to do at each run"},
            "id": {"type": "string", "description": "for remove: the job's id from list"},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
)


def place_of(request: TurnRequest) -> str:
    """Where a turn happens, as schedules are listed and bounded: `<channel>:<surface id>`."""
    if request.surface is None:
        return request.conversation_key
    return f"{request.channel}:{request.surface.id}"


def allowed(person: str | None, listed: Collection[str]) -> bool:
    """`slack:U0123` allows `slack:<team>:U0123`; `telegram:42` allows `telegram:42`."""
    if person is None:
        return False
    platform, _, rest = person.partition(":")
    user = rest.rpartition(":")[2]
    return person in listed or f"{platform}:{user}" in listed


def job_plan(schedule: ChatSchedule) -> JobPlan:
    """A chat schedule as the scheduler runs it: its own history, posting to its route."""
    run = RunPlan(
        schedule.job, "cron", schedule.job, None, route=schedule.route, tools=schedule.tools
    )
    return JobPlan(
        schedule.job,
        Schedule.parse(schedule.expression, schedule.timezone),
        schedule.prompt,
        True,
        run,
        since=schedule.created_at,
    )


async def job_plans(store: ChatSchedules) -> list[JobPlan]:
    """Every stored schedule as a job; one that no longer parses is skipped and logged."""
    plans = []
    for schedule in await store.schedules():
        try:
            plans.append(job_plan(schedule))
        except ScheduleError as exc:
            log.warning("chat_schedule_unreadable", job=schedule.job, error=str(exc))
    return plans


@dataclass(frozen=True)
class ScheduleDesk:
    """What every turn's `schedule` tool shares: the store, the settings, the operators (who may
    remove anyone's job), the time zone and `changed` (tells the scheduler to look again)."""

    store: ChatSchedules
    settings: SchedulesSettings
    timezone: str
    operators: frozenset[str] = frozenset()
    changed: Callable[[], None] = lambda: None
    now: Clock = utc_now

    def tool(self, request: TurnRequest) -> Tool:
        return ScheduleTool(self, request)


class ScheduleTool:
    """The `schedule` tool for one turn."""

    spec = SCHEDULE_SPEC

    def __init__(self, desk: ScheduleDesk, request: TurnRequest) -> None:
        self._desk = desk
        self._request = request

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        request = self._request
        if not allowed(request.person, self._desk.settings.allowed):
            raise ToolError(replies.SCHEDULE_NOT_ALLOWED)
        action = arguments.get("action")
        if action == "list":
            return await self._list()
        if action == "remove":
            return await self._remove(str(arguments.get("id") or ""))
        if action == "create":
            return await self._create(arguments.get("when"), arguments.get("prompt"))
        raise ToolError("action must be 'create', 'list' or 'remove'")

    async def _create(self, when: object, prompt: object) -> str:
        desk, request = self._desk, self._request
        if request.route is None or request.person is None:
            raise ToolError(replies.SCHEDULE_NOWHERE)
        if not isinstance(prompt, str) or not prompt.strip():
            raise ToolError("prompt is missing: say what each run should do")
        if len(prompt) > PROMPT_MAX_CHARS:
            raise ToolError(f"prompt is longer than {PROMPT_MAX_CHARS} characters: shorten it")
        try:
            schedule = Schedule.parse(to_cron(str(when or "")), desk.timezone)
        except ScheduleError as exc:
            raise ToolError(str(exc)) from None
        now = desk.now()
        shortest = _shortest_gap(schedule, now)
        minimum = desk.settings.min_interval_minutes
        if shortest < timedelta(minutes=minimum):
            raise ToolError(replies.schedule_too_often(minimum))
        made = ChatSchedule(
            id=uuid.uuid4().hex[:8],
            place=place_of(request),
            route=request.route,
            creator=request.person,
            expression=schedule.expression,
            timezone=schedule.timezone,
            prompt=prompt.strip(),
            created_at=now,
            tools=request.tools or (),  # what this place offers now: its runs get no more
        )
        met = await desk.store.add_schedule(
            made,
            per_place=desk.settings.max_per_conversation,
            per_person=desk.settings.max_per_person,
        )
        if met:
            limit = (
                desk.settings.max_per_conversation
                if met == "place"
                else desk.settings.max_per_person
            )
            raise ToolError(replies.schedule_limit(met, limit))
        desk.changed()
        log.info("chat_schedule_created", job=made.job, expression=made.expression)
        first = _local(schedule, schedule.next_after(now))
        return (
            f"Scheduled job {made.id}: '{schedule.expression}' in {schedule.timezone}; the first "
            f"run is {first}. Each run's answer is posted in this conversation."
        )

    async def _list(self) -> str:
        desk = self._desk
        found = await desk.store.schedules(place_of(self._request))
        if not found:
            return "No scheduled jobs here."
        now = desk.now()
        lines = [f"{len(found)} scheduled job(s) here:"]
        for item in found:
            mine = "yes" if item.creator == self._request.person else "no"
            try:
                schedule = Schedule.parse(item.expression, item.timezone)
                upcoming = _local(schedule, schedule.next_after(now))
            except ScheduleError:
                upcoming = "never (unreadable)"
            lines.append(
                f"- {item.id}: '{item.expression}' ({item.timezone}), next {upcoming}, "
                f"set up by this person: {mine}; does: {_short(item.prompt)}"
            )
        return "\n".join(lines)

    async def _remove(self, schedule_id: str) -> str:
        desk, request = self._desk, self._request
        found = {s.id: s for s in await desk.store.schedules(place_of(request))}
        item = found.get(schedule_id.strip())
        if item is None:
            raise ToolError(replies.schedule_unknown(schedule_id, sorted(found)))
        if item.creator != request.person and request.person not in desk.operators:
            raise ToolError(replies.SCHEDULE_NOT_YOURS)
        await desk.store.remove_schedule(item.id)
        desk.changed()
        log.info("chat_schedule_removed", job=item.job)
        return f"Removed scheduled job {item.id}."


def _shortest_gap(schedule: Schedule, after: datetime) -> timedelta:
    fires = schedule.fires_after(after)
    previous = next(fires)
    shortest = timedelta.max
    for _ in range(INTERVAL_SAMPLE):
        fire = next(fires)
        shortest = min(shortest, fire - previous)
        previous = fire
    return shortest


def _local(schedule: Schedule, instant: datetime) -> str:
    return schedule.local(instant).strftime("%a %Y-%m-%d %H:%M %Z")


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LISTED_PROMPT_CHARS else flat[: LISTED_PROMPT_CHARS - 1] + "…"
