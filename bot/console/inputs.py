"""What the console is handed by the composition root: the store, the approval desk, the cron
records, and views of what only the root knows (cron jobs, tools per surface, MCP servers' health,
the effective config). Plain values and callables: the console builds none of these."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.console.settings import ConsoleSettings
from bot.policy.budget import BudgetSettings
from bot.ports.approvals import PressDesk
from bot.ports.stores import OpenStore, RunRecords


@dataclass(frozen=True, slots=True)
class JobView:
    """One scheduled job as the schedules page lists it."""

    name: str
    expression: str
    timezone: str
    enabled: bool
    notify: str  # where it posts ("" for history only)
    origin: str  # "config" or "chat"


@dataclass(frozen=True, slots=True)
class ToolOffer:
    """The tools one surface rule is offered: (name the model sees, hints) pairs."""

    label: str
    tools: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ServerHealth:
    """One MCP server: whether it is up, what is wrong with it, how many tools it gives."""

    name: str
    up: bool
    problem: str | None
    tools: int


def _none() -> tuple[()]:
    return ()


@dataclass(frozen=True)
class ConsoleInputs:
    settings: ConsoleSettings
    store: OpenStore
    budget: BudgetSettings
    timezone: str  # where days begin (usage per day, spend today)
    secrets: Mapping[str, str] = field(default_factory=dict)  # every secret, by variable name
    desk: PressDesk | None = None  # decides approvals as a button press does
    runs: Callable[[], Awaitable[RunRecords]] | None = None  # cron records (pause, resume)
    jobs: Callable[[], Sequence[JobView]] = _none
    tools: Callable[[], Sequence[ToolOffer]] = _none
    servers: Callable[[], Sequence[ServerHealth]] = _none
    config_text: Callable[[], str] = str  # the effective config, secrets masked
    clock: Callable[[], float] = time.time
