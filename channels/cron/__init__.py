"""Scheduled posts and webhooks: request-driven turns started by the clock or by an HTTP call.

`plan_jobs` / `plan_hooks` check the configuration; `CronRunner` runs one turn and records it
(`CronRuns` is the port for the records); `CronScheduler` fires jobs on their schedules;
`WebhookEndpoint` serves `POST /hooks/<name>`. Nothing here imports the store or the host: the
composition root hands in the host (as a `TurnSink`), its deliverers and the run records.
"""

from channels.cron.plan import (
    Destination,
    HookPlan,
    JobPlan,
    RunPlan,
    parse_destination,
    plan_hooks,
    plan_jobs,
)
from channels.cron.runner import CronRunner, RunResult
from channels.cron.runs import CronRuns, describe
from channels.cron.schedule import Schedule
from channels.cron.scheduler import CronScheduler
from channels.cron.webhook import MAX_BODY_BYTES, WebhookEndpoint

__all__ = [
    "MAX_BODY_BYTES",
    "CronRunner",
    "CronRuns",
    "CronScheduler",
    "Destination",
    "HookPlan",
    "JobPlan",
    "RunPlan",
    "RunResult",
    "Schedule",
    "WebhookEndpoint",
    "describe",
    "parse_destination",
    "plan_hooks",
    "plan_jobs",
]
