"""Cron's and webhooks' settings: the `[cron]` section, the `[[webhooks]]` entries and the
`[schedules]` section (jobs people set up in chat)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from bot.config import Section, check_timezone
from bot.errors import ConfigError

DAY = 86_400


class CronJob(Section):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    schedule: str
    prompt: str
    timezone: str = "UTC"
    conversation_id: str | None = None
    notify: Annotated[str, Field(pattern=r"^(slack|telegram):\S+$")] | None = None
    enabled: bool = True

    _tz = field_validator("timezone")(check_timezone)


class CronSettings(Section):
    misfire_grace: Annotated[float, Field(ge=0, le=7 * DAY)] = 300.0
    # A failed run is tried again up to `retries` times: after `retry_delay` seconds, then four
    # times longer each time, never past the job's next slot.
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    retry_delay: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # Cost breakers (SPEC §17): the most tokens (input, cache and output, every call) one run may
    # use, and one job per day (midnight in the budget timezone); a job that trips one pauses.
    max_tokens_per_run: Annotated[int, Field(ge=1000, le=10**10)] = 500_000
    max_tokens_per_job_per_day: Annotated[int, Field(ge=1000, le=10**11)] | None = 5_000_000
    jobs: list[CronJob] = Field(default_factory=list)

    def check(self) -> None:
        names = [job.name for job in self.jobs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(
                f"cron.jobs: job name {duplicates[0]!r} is used more than once. Fix: give each "
                "job a unique name."
            )


class WebhookSettings(Section):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    token_env: Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")]
    prompt_template: str
    notify: Annotated[str, Field(pattern=r"^(slack|telegram):\S+$")] | None = None
    conversation_id: str | None = None


class SchedulesSettings(Section):
    """`[schedules]`: who may set up jobs in chat (person ids, `slack:U0123ABCD` or
    `telegram:4242`), their bounds, and the time zone plain times are read in."""

    allowed: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*:\S+$")]] = Field(
        default_factory=list
    )
    max_per_conversation: Annotated[int, Field(ge=1, le=1000)] = 5
    max_per_person: Annotated[int, Field(ge=1, le=10_000)] = 10
    min_interval_minutes: Annotated[int, Field(ge=1, le=7 * 24 * 60)] = 60
    timezone: str | None = None  # default: agent.timezone

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return None if value is None else check_timezone(value)

    @property
    def enabled(self) -> bool:
        return bool(self.allowed)
