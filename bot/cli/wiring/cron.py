"""Cron wired in: the jobs and webhooks checked (a ConfigError stops start-up), the runner that
turns them into host turns, the scheduler, and the desk where schedules are set up in chat."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from bot.cli.settings import Config
from bot.host import Host
from bot.ports.delivery import Deliverer
from bot.ports.stores import RunRecords

if TYPE_CHECKING:  # cron's modules load only when a configuration uses them
    from channels.cron.chat import ScheduleDesk
    from channels.cron.plan import JobPlan
    from channels.cron.runner import CronRunner
    from channels.cron.scheduler import CronScheduler
    from channels.cron.webhook import WebhookEndpoint


@dataclass(frozen=True)
class Cron:
    """What `prepare_cron` built: the jobs, their runner, the webhooks (None: no route) and the
    scheduler (None when the command fires no schedules)."""

    jobs: list[JobPlan]
    runner: CronRunner
    webhooks: WebhookEndpoint | None
    scheduler: CronScheduler | None


async def schedule_desk(
    config: Config, records: Callable[[], Awaitable[RunRecords]], changed: Callable[[], None]
) -> ScheduleDesk | None:
    """Schedules from chat, when `[schedules] allowed` names anyone: their records (shared with
    cron's) and the desk the `schedule` tool works at."""
    settings = config.settings
    if not settings.schedules.enabled:
        return None
    from channels.cron.chat import ScheduleDesk

    return ScheduleDesk(
        await records(),
        settings.schedules,
        settings.schedules.timezone or settings.agent.timezone,
        operators=frozenset(settings.budget.operators),
        changed=changed,
    )


async def prepare_cron(
    config: Config,
    host: Host,
    deliverers: Mapping[str, Deliverer],
    records: Callable[[], Awaitable[RunRecords]],
    app: web.Application,
    *,
    http: bool,
    scheduler: bool,
) -> Cron | None:
    """Check jobs and webhooks, open their run records and add the webhook route to `app` (before
    the HTTP server freezes its router); None when there is nothing to run. `http`: webhooks
    are served; `scheduler`: jobs fire on their schedules."""
    from channels.cron.plan import plan_hooks, plan_jobs
    from channels.cron.runner import CronRunner
    from channels.cron.webhook import WebhookEndpoint

    settings = config.settings
    platforms = settings.platforms()
    jobs = plan_jobs(settings.cron, platforms)
    hooks = (
        plan_hooks(settings.webhooks, config.secrets, platforms, http=settings.http.enabled)
        if http
        else []
    )
    chat = settings.schedules.enabled
    if not jobs and not hooks and not chat:
        return None
    runs = await records()
    runner = CronRunner(host, deliverers, runs)
    webhooks = WebhookEndpoint(hooks, runner) if hooks else None
    if webhooks is not None:
        webhooks.install(app)
    fires = None
    if (jobs or chat) and scheduler:
        from channels.cron.chat import job_plans
        from channels.cron.scheduler import CronScheduler, SlotRules

        fires = CronScheduler(
            jobs,
            runner,
            runs,
            SlotRules(
                settings.cron.misfire_grace, settings.cron.retries, settings.cron.retry_delay
            ),
            source=(lambda: job_plans(runs)) if chat else None,
        )
    return Cron(jobs, runner, webhooks, fires)
