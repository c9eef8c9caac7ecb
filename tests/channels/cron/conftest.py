"""Fixtures for the cron tests: a scheduler rig on a manual clock, with doubles for the host."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from bot.cli.settings import Settings
from bot.config import Secrets
from bot.ports.cron import CronRuns
from channels.cron.plan import HookPlan, JobPlan, plan_hooks, plan_jobs
from channels.cron.runner import CronRunner
from channels.cron.scheduler import CronScheduler, SlotRules
from tests.channels.cron.doubles import (
    ManualClock,
    MemoryRuns,
    RecordingDeliverer,
    ScriptedSink,
    utc,
)

# Monday 2024-06-03, 08:59 UTC.
START = utc(2024, 6, 3, 8, 59)


def settings_with(jobs: list[dict[str, Any]], **sections: Any) -> Settings:
    raw: dict[str, Any] = {"agent": {"identity_path": "IDENTITY.md"}, "cron": {"jobs": jobs}}
    raw["slack"] = {"enabled": True}
    raw.update(sections)
    return Settings.model_validate(raw)


def planned_jobs(settings: Settings) -> list[JobPlan]:
    return plan_jobs(settings.cron, settings.platforms())


def planned_hooks(settings: Settings, secrets: Secrets) -> list[HookPlan]:
    return plan_hooks(settings.webhooks, secrets, settings.platforms(), http=settings.http.enabled)


def job(name: str = "digest", schedule: str = "0 * * * *", **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "prompt": f"Write the {name}.", **extra}


@dataclass
class Rig:
    clock: ManualClock
    sink: ScriptedSink
    deliverer: RecordingDeliverer
    runs: CronRuns
    scheduler: CronScheduler
    jobs: list[JobPlan]

    async def start(self) -> None:
        await self.scheduler.start()

    def records(self, name: str = "digest") -> list[Any]:
        assert isinstance(self.runs, MemoryRuns)
        return self.runs.of(name)


RigFactory = Callable[..., Rig]


@pytest.fixture
async def make_rig() -> AsyncIterator[RigFactory]:
    made: list[Rig] = []

    def factory(
        *jobs: dict[str, Any],
        grace: float = 300.0,
        retries: int = 2,
        retry_delay: float = 30.0,
        runs: CronRuns | None = None,
        clock: ManualClock | None = None,
        sink: ScriptedSink | None = None,
        deliverer: RecordingDeliverer | None = None,
    ) -> Rig:
        clock = clock or ManualClock(START)
        sink = sink or ScriptedSink()
        deliverer = deliverer or RecordingDeliverer()
        runs = runs if runs is not None else MemoryRuns()
        plans = planned_jobs(settings_with(list(jobs or [job()])))
        runner = CronRunner(
            sink,
            {deliverer.platform: deliverer},
            runs,
            now=clock.now,
        )
        scheduler = CronScheduler(
            plans,
            runner,
            runs,
            SlotRules(grace, retries, retry_delay),
            now=clock.now,
            sleep=clock.sleep,
        )
        rig = Rig(clock, sink, deliverer, runs, scheduler, plans)
        made.append(rig)
        return rig

    yield factory
    for rig in made:
        await rig.scheduler.stop(grace=0)
