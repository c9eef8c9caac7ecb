"""Scheduled runs: the record one cron or webhook run leaves, and the port that keeps them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from bot.turns import ReplyRoute


class CronRunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"  # the turn finished; posted (when the run notifies) or kept in history only
    SILENT = "silent"  # the agent answered with the silent token: nothing posted
    UNDELIVERED = "undelivered"  # the turn finished but the platform did not take every part
    FAILED = "failed"  # the turn did not finish, or the host refused it
    STOPPED = "stopped"  # a cost breaker stopped the turn; the job is paused (never retried)
    INTERRUPTED = "interrupted"  # the process stopped while the run was in flight


class CronTrigger(StrEnum):
    SCHEDULE = "schedule"
    CATCH_UP = "catch_up"  # a slot missed while down or busy, run late within the grace
    RETRY = "retry"  # the turn again after a failure
    REDELIVERY = "redelivery"  # the same answer posted again after nothing was accepted
    MANUAL = "manual"  # `bot cron run NAME`
    WEBHOOK = "webhook"


@dataclass(frozen=True, slots=True)
class CronRun:
    """One attempt of a job (or webhook call). `scheduled_for` is the schedule slot it serves
    (None for manual and webhook runs); `parts`/`accepted` count the answer's messages and how
    many the platform took; `delivered` is true only when it took every one."""

    run_id: str
    job: str
    trigger: CronTrigger
    fired_at: datetime
    status: CronRunStatus = CronRunStatus.RUNNING
    attempt: int = 1
    scheduled_for: datetime | None = None
    finished_at: datetime | None = None
    delivered: bool = False
    parts: int = 0
    accepted: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class JobPause:
    """A job a cost breaker paused: why (`run`, `day` or `repeat`) and when."""

    job: str
    reason: str
    paused_at: datetime


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

    async def pause(self, job: str, reason: str, at: datetime) -> bool:
        """Pause the job (durably, for every replica): True when this paused it, False when it
        was paused already (so its destination is told once)."""

    async def resume(self, job: str) -> bool:
        """Lift the job's pause; True when it was paused."""

    async def paused(self) -> list[JobPause]:
        """Every paused job, oldest pause first."""


@dataclass(frozen=True, slots=True)
class ChatSchedule:
    """A job someone set up in chat (SPEC §17). `place` is where it was set up and is listed
    (`<channel>:<surface id>`), `route` where its runs post (the conversation it was asked in),
    `creator` the person id: all three host-side, never shown to the model. `tools` are the
    tools (names the model sees) its place offered when it was set up: its runs get those, never
    more."""

    id: str
    place: str
    route: ReplyRoute
    creator: str
    expression: str
    timezone: str
    prompt: str
    created_at: datetime
    tools: tuple[str, ...] = ()

    @property
    def job(self) -> str:
        """The name its runs, slots and pause are recorded under."""
        return f"{SCHEDULE_PREFIX}{self.id}"


SCHEDULE_PREFIX = "schedule:"


class ChatSchedules(Protocol):
    """The jobs set up in chat, durable and shared by every replica."""

    async def add_schedule(self, schedule: ChatSchedule, *, per_place: int, per_person: int) -> str:
        """Store it unless its place already has `per_place` or its creator `per_person`
        schedules: "" when stored, else which bound it met ("place" or "person")."""

    async def schedules(self, place: str | None = None) -> list[ChatSchedule]:
        """Every schedule (or those of one place), oldest first."""

    async def remove_schedule(self, schedule_id: str) -> bool:
        """Remove it; True when it existed."""
