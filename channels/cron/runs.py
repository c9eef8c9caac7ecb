"""Run records: the port that keeps them, and how one reads to an operator.

The record itself (`bot.ports.CronRun`) is shared with the SQLite implementation in bot.store.
One record per attempt, written twice: when the run fires (status `running`, so a crash leaves a
trace and a restart never re-fires that slot) and when it finishes. `delivered` is true only when
the platform accepted every part of the answer; `error` says why not, or why the run failed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot.ports import CronRun, CronRunStatus

ERROR_MAX_CHARS = 500


def describe(run: CronRun) -> str:
    """One line for an operator: what happened and, when nothing was posted, why."""
    status = run.status
    if status is CronRunStatus.SILENT:
        return "silent: nothing posted (the agent answered with the silent token)"
    if status is CronRunStatus.OK and run.delivered:
        return f"delivered ({run.parts} {'part' if run.parts == 1 else 'parts'})"
    if status is CronRunStatus.OK:
        return "ok: no notify destination, the answer is in the conversation's history only"
    if status is CronRunStatus.UNDELIVERED:
        reason = f" ({run.error})" if run.error else ""
        return f"not delivered: {run.accepted} of {run.parts} parts accepted{reason}"
    if status is CronRunStatus.RUNNING:
        return "running"
    return f"{status.value}: {run.error or 'no reason recorded'}"


def bounded_error(text: str | None) -> str | None:
    """Errors are kept short: a reason, not a dump."""
    if not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= ERROR_MAX_CHARS else flat[: ERROR_MAX_CHARS - 1] + "…"


class CronRuns(Protocol):
    """Durable run records, bounded (the newest records per job are kept)."""

    async def save(self, run: CronRun) -> None:
        """Insert the record, or replace the one with the same `run_id`."""

    async def latest(self, job: str) -> CronRun | None:
        """The job's most recent record by `fired_at`, or None."""

    async def last_slot(self, job: str) -> datetime | None:
        """The latest schedule slot any record of the job served, or None."""

    async def recent(self, job: str, limit: int = 20) -> list[CronRun]:
        """The job's newest records, newest first."""

    async def interrupt_running(self, finished_at: datetime) -> int:
        """Mark records still `running` (left by a stopped process) interrupted; how many."""

    async def claim_slot(self, job: str, slot: datetime) -> bool:
        """Claim one schedule slot of the job for this process: True for the first claim ever,
        False when another process (a replica on the same store) claimed it, so each slot runs
        once however many schedulers watch it."""
