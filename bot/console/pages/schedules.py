"""Schedules: the configured cron jobs and those set up in chat, each with its recent runs and
whether it is paused (and by which breaker or operator); pause and resume, audited. The pause is
the durable one a cost breaker sets, so every replica's scheduler skips the job's slots."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.console.pages.common import Console
from bot.ports.stores import RunRecords

NAV = ("schedules", "Schedules")
RUNS_SHOWN = 5
MAX_JOB = 200


def install(app: web.Application, console: Console) -> None:
    async def page(request: web.Request) -> web.Response:
        return await _page(console, request)

    async def pause(request: web.Request) -> web.Response:
        return await _change(console, request, pausing=True)

    async def resume(request: web.Request) -> web.Response:
        return await _change(console, request, pausing=False)

    app.router.add_get("/schedules", page, name="schedules")
    app.router.add_post("/schedules/pause", pause, name="schedule_pause")
    app.router.add_post("/schedules/resume", resume, name="schedule_resume")


async def _page(console: Console, request: web.Request, notice: str = "") -> web.Response:
    opened = console.inputs.runs
    if opened is None:
        return console.render.page(
            "schedules.html", request, title="Schedules", jobs=[], notice=notice, off=True
        )
    runs = await opened()
    pauses = {pause.job: pause for pause in await runs.paused()}
    listed: list[dict[str, Any]] = [
        {
            "name": j.name,
            "expression": j.expression,
            "timezone": j.timezone,
            "origin": j.origin,
            "enabled": j.enabled,
            "does": j.notify or "history only",
        }
        for j in console.inputs.jobs()
    ]
    listed += [
        {
            "name": s.job,
            "expression": s.expression,
            "timezone": s.timezone,
            "origin": f"chat ({s.place})",
            "enabled": True,
            "does": " ".join(s.prompt.split())[:120],
        }
        for s in await runs.schedules()
    ]
    for job in listed:
        name = str(job["name"])
        paused = pauses.get(name)
        job["paused"] = f"{paused.reason} at {console.shown(paused.paused_at)}" if paused else ""
        job["runs"] = await _runs(console, runs, name)
    return console.render.page(
        "schedules.html", request, title="Schedules", jobs=listed, notice=notice, off=False
    )


async def _runs(console: Console, runs: RunRecords, job: str) -> list[dict[str, Any]]:
    return [
        {
            "fired": console.shown(run.fired_at),
            "status": run.status.value,
            "trigger": run.trigger.value,
            "error": run.error or "",
        }
        for run in await runs.recent(job, RUNS_SHOWN)
    ]


async def _change(console: Console, request: web.Request, *, pausing: bool) -> web.Response:
    form = await request.post()
    job = str(form.get("job", ""))[:MAX_JOB]
    opened = console.inputs.runs
    known = {j.name for j in console.inputs.jobs()}
    if opened is None:
        return await _page(console, request, notice="Schedules are off in this configuration.")
    runs = await opened()
    known |= {s.job for s in await runs.schedules()}
    if job not in known:
        notice = f"No job named {job!r}: nothing changed."
    elif pausing:
        reason = f"paused by {console.operator(request).name} in the console"
        changed = await runs.pause(job, reason, console.now())
        notice = f"{job}: paused." if changed else f"{job} was paused already."
    else:
        changed = await runs.resume(job)
        notice = (
            f"{job}: resumed; it runs again at its next slot."
            if changed
            else (f"{job} was not paused.")
        )
    await console.audit(request, "pause" if pausing else "resume", f"job {job}", notice)
    return await _page(console, request, notice=notice)
