"""Run records as an operator reads them, and the bound on a recorded error.

The record and the port that keeps it (`bot.ports.cron`) are the core's, so the stores speak them.
One record per attempt, written twice: when the run fires (status `running`, so a crash leaves a
trace and a restart never re-fires that slot) and when it finishes. `delivered` is true only when
the platform accepted every part of the answer; `error` says why not, or why the run failed.
"""

from __future__ import annotations

from bot.ports.cron import CronRun, CronRunStatus

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
    if status is CronRunStatus.STOPPED:
        return f"stopped by a cost breaker: {run.error or 'no reason recorded'}"
    return f"{status.value}: {run.error or 'no reason recorded'}"


def bounded_error(text: str | None) -> str | None:
    """Errors are kept short: a reason, not a dump."""
    if not text:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= ERROR_MAX_CHARS else flat[: ERROR_MAX_CHARS - 1] + "…"
