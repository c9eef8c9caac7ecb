"""Running one request-driven turn for a job or webhook, and keeping its run record honest.

The runner builds the TurnRequest (routed to the notify destination's top level), hands it to the
host and waits for the turn to be published and delivered. The host does the posting; the runner
only reads the outcome: `delivered` is true only when the platform accepted every part.

A run a cost breaker stopped (SPEC §17) is recorded `stopped` and never retried; its job is paused
durably, and the first pause is told to the job's destination in one line.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import structlog

from bot import replies
from bot.ports.cron import CronRun, CronRuns, CronRunStatus, CronTrigger
from bot.ports.delivery import Deliverer, DeliveryReport
from bot.ports.intake import TurnResult, TurnSink
from bot.turns import Outcome, ReplyRoute
from channels.cron.plan import RunPlan
from channels.cron.runs import bounded_error

log = structlog.get_logger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished attempt: its record, and the final text (for `bot cron run` and redelivery)."""

    record: CronRun
    text: str = ""


class CronRunner:
    """Runs one attempt at a time for whoever asks (the scheduler, webhooks, `bot cron run`)."""

    def __init__(
        self,
        sink: TurnSink,
        deliverers: Mapping[str, Deliverer],
        runs: CronRuns,
        *,
        now: Clock = utc_now,
    ) -> None:
        self._sink = sink
        self._deliverers = deliverers
        self._runs = runs
        self._now = now

    async def run(
        self,
        plan: RunPlan,
        text: str,
        *,
        trigger: CronTrigger,
        scheduled_for: datetime | None = None,
        attempt: int = 1,
        run_id: str | None = None,
    ) -> RunResult:
        """Run the turn and record it; never raises for a failed turn (the record says why)."""
        record = CronRun(
            run_id=run_id or uuid.uuid4().hex,
            job=plan.record_key,
            trigger=trigger,
            fired_at=self._now(),
            attempt=attempt,
            scheduled_for=scheduled_for,
        )
        # The run id is the turn id, so these events line up with the host's own turn events.
        bound = log.bind(
            job=plan.record_key,
            turn_id=record.run_id,
            conversation_key=plan.conversation_key,
            trigger=trigger.value,
        )
        route, missing = self._route(plan)
        if missing:
            return RunResult(await self._finish(record, CronRunStatus.FAILED, error=missing))
        await self._save(record)
        bound.info("cron_run_started", attempt=attempt)
        request = plan.request(
            text, turn_id=record.run_id, received_at=record.fired_at, route=route
        )
        try:
            result = await self._sink.run(request)
        except asyncio.CancelledError:
            await asyncio.shield(self._finish(record, CronRunStatus.INTERRUPTED, error="cancelled"))
            raise
        except Exception as exc:  # the record must say what happened, whatever the host did
            bound.exception("cron_run_crashed", error=type(exc).__name__)
            return RunResult(
                await self._finish(record, CronRunStatus.FAILED, error=type(exc).__name__)
            )
        finished = await self._finish_with(record, plan, result)
        bound.info(
            "cron_run_finished",
            status=finished.status.value,
            delivered=finished.delivered,
            error=finished.error,
        )
        return RunResult(finished, result.text)

    async def redeliver(self, plan: RunPlan, previous: RunResult, *, attempt: int) -> RunResult:
        """Post an answer again that the platform took no part of (no new turn, no new history)."""
        record = CronRun(
            run_id=uuid.uuid4().hex,
            job=plan.record_key,
            trigger=CronTrigger.REDELIVERY,
            fired_at=self._now(),
            attempt=attempt,
            scheduled_for=previous.record.scheduled_for,
        )
        route, missing = self._route(plan)
        if missing or route is None:
            return RunResult(await self._finish(record, CronRunStatus.FAILED, error=missing))
        deliverer = self._deliverers.get(route.platform)
        assert deliverer is not None  # _route found it
        report = await deliverer.post_text(route, previous.text, notice_id=record.run_id)
        status = CronRunStatus.OK if report.delivered else CronRunStatus.UNDELIVERED
        finished = await self._finish(record, status, report=report)
        log.info(
            "cron_redelivered",
            job=plan.record_key,
            run_id=record.run_id,
            turn_id=previous.record.run_id,
            delivered=finished.delivered,
            error=finished.error,
        )
        return RunResult(finished, previous.text)

    def _route(self, plan: RunPlan) -> tuple[ReplyRoute | None, str | None]:
        if plan.route is not None:
            if plan.route.platform not in self._deliverers:
                return None, f"the {plan.route.platform} channel is not running in this process"
            return plan.route, None
        if plan.notify is None:
            return None, None
        deliverer = self._deliverers.get(plan.notify.platform)
        if deliverer is None:
            return None, f"the {plan.notify.platform} channel is not running in this process"
        try:
            return deliverer.route_to(plan.notify.id), None
        except Exception as exc:  # the channel refused the destination: say so in the record
            return None, f"{plan.notify} is not a destination the channel accepts ({exc})"

    async def _finish_with(self, record: CronRun, plan: RunPlan, result: TurnResult) -> CronRun:
        if result.outcome == Outcome.STOPPED:
            finished = await self._finish(record, CronRunStatus.STOPPED, error=result.error)
            await self._pause(plan, breaker_of(result.error))
            return finished
        if result.outcome == Outcome.SILENT:
            return await self._finish(record, CronRunStatus.SILENT)
        if result.outcome != Outcome.OK:
            reason = result.error or f"the host answered {str(result.outcome)!r}"
            # The host may have posted a short apology; that is not this run's answer.
            return await self._finish(
                record, CronRunStatus.FAILED, error=f"{result.outcome}: {reason}"
            )
        if not plan.notifies:
            return await self._finish(record, CronRunStatus.OK)
        report = result.delivery or DeliveryReport(parts=1, accepted=0, error="nothing was posted")
        status = CronRunStatus.OK if report.delivered else CronRunStatus.UNDELIVERED
        return await self._finish(record, status, report=report)

    async def _pause(self, plan: RunPlan, breaker: str) -> None:
        """Pause a scheduled job whose breaker tripped; the first pause tells its destination
        (webhooks are not paused: each call is its own run, stopped by the same breakers)."""
        if plan.channel != "cron":
            return
        try:
            first = await self._runs.pause(plan.record_key, breaker, self._now())
        except Exception as exc:  # the run is recorded stopped; the next trip pauses it
            log.warning("cron_pause_failed", job=plan.record_key, error=type(exc).__name__)
            return
        log.warning("cron_job_paused", job=plan.record_key, breaker=breaker, first=first)
        route, _ = self._route(plan)
        if not first or route is None:
            return
        deliverer = self._deliverers[route.platform]
        notice = replies.job_paused(plan.record_key, breaker)
        report = await deliverer.post_text(route, notice, notice_id=f"pause-{uuid.uuid4().hex}")
        if not report.delivered:  # the pause holds either way; the log says it was not told
            log.warning("cron_pause_untold", job=plan.record_key, error=report.error)

    async def _finish(
        self,
        record: CronRun,
        status: CronRunStatus,
        *,
        error: str | None = None,
        report: DeliveryReport | None = None,
    ) -> CronRun:
        delivered = bool(report and report.delivered and status is CronRunStatus.OK)
        if report is not None and not report.delivered and error is None:
            error = report.error or "the platform did not accept every part"
        finished = replace(
            record,
            status=status,
            finished_at=self._now(),
            delivered=delivered,
            parts=report.parts if report else 0,
            accepted=report.accepted if report else 0,
            error=bounded_error(error),
        )
        await self._save(finished)
        return finished

    async def _save(self, record: CronRun) -> None:
        try:
            await self._runs.save(record)
        except Exception as exc:  # a lost record must not stop the job; say so in the log
            log.exception("cron_run_record_failed", turn_id=record.run_id, error=type(exc).__name__)


def breaker_of(error: str | None) -> str:
    """Which breaker a stopped turn's error names (`breaker:<kind>: ...`)."""
    head = (error or "").split(":", 2)
    return head[1] if len(head) > 1 and head[0] == "breaker" else "breaker"
