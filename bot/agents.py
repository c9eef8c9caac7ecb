"""The host's agents as values (SPEC §15): `Agent` (who answers: files, model, tools, budget,
memory scope, name and icon) and the `Roster` that says which agent answers a turn: the one its
message addresses among those its place lets answer, else the place's first, else the default.

A message addresses an agent by `@name` anywhere in it or by the agent's display name opening
it; the earliest address wins. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from bot.config import AgentSettings, CoreSettings
from bot.config.agents import AgentEntry, MemoryMode
from bot.policy.budget import BudgetLimits
from bot.policy.surfaces import SurfaceRule

# The one agent of a config with `[agent]` alone (no `[[agents]]`).
DEFAULT_AGENT = "default"


@dataclass(frozen=True, slots=True)
class Agent:
    """One agent: its files (`settings`), model (None: `[model]`'s), tool globs (None: what the
    surface rule offers), daily budget, memory scope, and how it shows (name and icon)."""

    name: str
    settings: AgentSettings | None = None  # its files (None: built without a config)
    display_name: str = ""
    icon: str | None = None
    model: str | None = None
    tools: tuple[str, ...] | None = None
    budget: BudgetLimits | None = None
    memory: MemoryMode = "shared"

    @property
    def shown(self) -> str:
        """The name people see on its messages."""
        return self.display_name or self.name

    def allows(self, tool: str) -> bool:
        """Whether its own globs leave `tool` (a name the model sees) in."""
        return self.tools is None or any(fnmatchcase(tool, glob) for glob in self.tools)


def agent_of(entry: AgentEntry, base: AgentSettings) -> Agent:
    return Agent(
        name=entry.name,
        settings=entry.settings(base),
        display_name=entry.display_name or "",
        icon=entry.icon,
        model=entry.model,
        tools=tuple(entry.tools) if entry.tools is not None else None,
        budget=entry.budget,
        memory=entry.memory,
    )


class Roster:
    """The configured agents, the first the default one."""

    def __init__(self, agents: Sequence[Agent]) -> None:
        if not agents:
            raise ValueError("a roster needs at least one agent")
        self._agents = tuple(agents)
        self._by_name = {agent.name: agent for agent in agents}

    @classmethod
    def of(cls, settings: CoreSettings) -> Roster:
        if not settings.agents:
            return cls([Agent(DEFAULT_AGENT, settings.agent)])
        return cls([agent_of(entry, settings.agent) for entry in settings.agents])

    @property
    def default(self) -> Agent:
        return self._agents[0]

    @property
    def all(self) -> tuple[Agent, ...]:
        return self._agents

    @property
    def several(self) -> bool:
        return len(self._agents) > 1

    def get(self, name: str | None) -> Agent:
        """The agent of that name; the default one for None or a name no longer configured."""
        return self._by_name.get(name or "", self.default)

    def here(self, rule: SurfaceRule | None) -> tuple[Agent, ...]:
        """Who may answer where `rule` applies: its `agents`, or the default agent."""
        names = rule.agents if rule is not None else None
        if not names:
            return (self.default,)
        return tuple(self._by_name[name] for name in names if name in self._by_name)

    def answering(self, text: str, rule: SurfaceRule | None) -> Agent:
        """The agent a message answers to where `rule` applies."""
        here = self.here(rule) or (self.default,)
        return addressed(text, here) or here[0]


# The roster of a host built without settings (tests, tools): the default agent alone.
SOLO = Roster([Agent(DEFAULT_AGENT)])


def addressed(text: str, agents: Iterable[Agent]) -> Agent | None:
    """The agent `text` addresses first (`@name`, or its display name opening the text)."""
    best: tuple[int, Agent] | None = None
    for agent in agents:
        at = _position(text, agent)
        if at is not None and (best is None or at < best[0]):
            best = (at, agent)
    return best[1] if best is not None else None


def _position(text: str, agent: Agent) -> int | None:
    mention = re.search(rf"(?<![\w@.])@{re.escape(agent.name)}(?![\w-])", text, re.IGNORECASE)
    if mention is not None:
        return mention.start()
    if agent.display_name:
        opening = re.match(rf"\s*@?{re.escape(agent.display_name)}(?![\w-])", text, re.IGNORECASE)
        if opening is not None:
            return 0
    return None
