"""Reading `[[cron.jobs]]` and `[[webhooks]]` into checked run plans, and a plan into a TurnRequest.

Everything a run needs is decided here, once, at startup: the schedule, the conversation key, the
notify destination (checked against the channels this host runs) and, for webhooks, the bearer
token. Every problem is a `ConfigError` that names the entry, the value and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot.config import Secrets
from bot.errors import ConfigError, ScheduleError
from bot.turns import ConversationKind, ReplyRoute, TurnRequest
from channels.cron.schedule import Schedule
from channels.cron.settings import CronJob, CronSettings, WebhookSettings

Platform = Literal["slack", "telegram"]
WEBHOOK_RECORD_PREFIX = "webhook:"
BODY_PLACEHOLDER = "{body}"
CONVERSATION_ID_MAX = 200

# Slack conversation ids (C…, G…, D…) and user ids; Telegram numeric chat ids, optionally with a
# forum topic id (`-1001234567890:7`), the forms the channels' `route_to` accepts.
_DESTINATION_ID = {
    "slack": re.compile(r"^[A-Z][A-Z0-9]{1,31}$"),
    "telegram": re.compile(r"^-?[0-9]{1,20}(:[0-9]{1,10})?$"),
}
_DESTINATION_EXAMPLE = {"slack": "slack:C0123456789", "telegram": "telegram:-1001234567890"}
_CONVERSATION_ID = re.compile(rf"^[^\s\x00-\x1f\x7f]{{1,{CONVERSATION_ID_MAX}}}$")


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a run's final answer is posted: a platform and a top-level destination id there."""

    platform: Platform
    id: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.id}"


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What every run of one job or webhook turns into (all but the text and the clock).

    `record_key` names the runs in the run records: the job name, `webhook:<name>`, or
    `schedule:<id>` for a job set up in chat (whose `route` is where it posts).
    """

    record_key: str
    channel: Literal["cron", "webhook"]
    conversation_key: str
    notify: Destination | None
    route: ReplyRoute | None = None  # a chat schedule's: the conversation it was set up in
    tools: tuple[str, ...] | None = None  # a chat schedule's: what its place offered

    @property
    def notifies(self) -> bool:
        return self.notify is not None or self.route is not None

    def request(
        self, text: str, *, turn_id: str, received_at: datetime, route: ReplyRoute | None
    ) -> TurnRequest:
        """A request-driven turn: nobody can answer back; no speaker, no surface."""
        return TurnRequest(
            conversation_key=self.conversation_key,
            kind=ConversationKind.REQUEST,
            channel=self.channel,
            text=text,
            received_at=received_at,
            turn_id=turn_id,
            route=route,
            notifies=self.notifies,
            tools=self.tools,
        )


@dataclass(frozen=True, slots=True)
class JobPlan:
    name: str
    schedule: Schedule
    prompt: str
    enabled: bool
    run: RunPlan
    since: datetime | None = None  # a job set up in chat: no slot before it was set up


@dataclass(frozen=True, slots=True)
class HookPlan:
    name: str
    prompt_template: str
    token: str  # never logged, never recorded; compared in constant time
    run: RunPlan

    def __repr__(self) -> str:
        return f"HookPlan(name={self.name!r}, run={self.run!r})"

    def prompt(self, body: str) -> str:
        """The template with the request body in place of `{body}` (a plain replace: the body is
        data, and str.format would read braces in the template or the body as fields)."""
        return self.prompt_template.replace(BODY_PLACEHOLDER, body)


def plan_jobs(cron: CronSettings, platforms: Collection[str]) -> list[JobPlan]:
    """Every `[[cron.jobs]]` entry, checked against the platforms this host runs; raises
    ConfigError on the first problem."""
    plans = [_plan_job(index, job, platforms) for index, job in enumerate(cron.jobs)]
    _check_unique([p.name for p in plans], "cron.jobs", "job")
    return plans


def plan_hooks(
    webhooks: Sequence[WebhookSettings],
    secrets: Secrets,
    platforms: Collection[str],
    *,
    http: bool,
) -> list[HookPlan]:
    """Every `[[webhooks]]` entry, checked (`http`: whether the HTTP port serves them); raises
    ConfigError on the first problem."""
    if webhooks and not http:
        raise ConfigError(
            "webhooks: webhooks are configured but the HTTP port is off (http.enabled = false). "
            "Fix: set http.enabled = true, or remove the [[webhooks]] entries."
        )
    plans = [_plan_hook(index, hook, secrets, platforms) for index, hook in enumerate(webhooks)]
    _check_unique([p.name for p in plans], "webhooks", "webhook")
    return plans


def parse_destination(text: str, where: str, platforms: Collection[str]) -> Destination:
    """`slack:<channel id>` or `telegram:<chat id>`, on a channel this host runs."""
    platform, _, ident = text.partition(":")
    if platform not in _DESTINATION_ID:
        raise ConfigError(
            f"{where}.notify = {text!r}: unknown platform {platform!r}. Fix: write "
            f"{_DESTINATION_EXAMPLE['slack']!r} or {_DESTINATION_EXAMPLE['telegram']!r}."
        )
    name: Platform = "slack" if platform == "slack" else "telegram"
    if not _DESTINATION_ID[name].match(ident):
        raise ConfigError(
            f"{where}.notify = {text!r}: {ident!r} is not a {name} destination id. Fix: write it "
            f"like {_DESTINATION_EXAMPLE[name]!r}."
        )
    if name not in platforms:
        raise ConfigError(
            f"{where}.notify = {text!r}: the {name} channel is not enabled, so nothing could be "
            f"posted there. Fix: set [{name}] enabled = true (with its tokens), or change or "
            "remove notify."
        )
    return Destination(name, ident)


def _plan_job(index: int, job: CronJob, platforms: Collection[str]) -> JobPlan:
    where = f"cron.jobs[{index}] (job {job.name!r})"
    try:
        schedule = Schedule.parse(job.schedule, job.timezone)
    except ScheduleError as exc:
        raise ConfigError(f"{where}.schedule: {exc}") from None
    _check_text(job.prompt, f"{where}.prompt", "the instruction the agent runs on each tick")
    notify = parse_destination(job.notify, where, platforms) if job.notify else None
    key = _conversation_key(job.conversation_id, f"cron:{job.name}", where)
    return JobPlan(
        job.name, schedule, job.prompt, job.enabled, RunPlan(job.name, "cron", key, notify)
    )


def _plan_hook(
    index: int, hook: WebhookSettings, secrets: Secrets, platforms: Collection[str]
) -> HookPlan:
    where = f"webhooks[{index}] (webhook {hook.name!r})"
    _check_text(hook.prompt_template, f"{where}.prompt_template", "the prompt, with {body}")
    token = secrets.get(hook.token_env)
    if not token:
        raise ConfigError(
            f"{where}.token_env = {hook.token_env!r}: that environment variable is not set, so "
            f"no caller could authenticate. Fix: export {hook.token_env}=<a long random token> "
            "(or put it in .env)."
        )
    notify = parse_destination(hook.notify, where, platforms) if hook.notify else None
    key = _conversation_key(hook.conversation_id, f"webhook:{hook.name}", where)
    record = f"{WEBHOOK_RECORD_PREFIX}{hook.name}"
    return HookPlan(hook.name, hook.prompt_template, token, RunPlan(record, "webhook", key, notify))


def _conversation_key(conversation_id: str | None, default: str, where: str) -> str:
    if conversation_id is None:
        return default
    if not _CONVERSATION_ID.match(conversation_id):
        raise ConfigError(
            f"{where}.conversation_id = {conversation_id!r}: must be 1 to "
            f"{CONVERSATION_ID_MAX} characters without spaces or control characters. Fix: use "
            "a short name such as 'daily-digest'."
        )
    return conversation_id


def _check_text(value: str, key: str, what: str) -> None:
    if not value.strip():
        raise ConfigError(f"{key} is empty. Fix: write {what}.")


def _check_unique(names: Sequence[str], key: str, kind: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(
                f"{key}: {kind} name {name!r} is used more than once. Fix: give each {kind} a "
                "unique name."
            )
        seen.add(name)
