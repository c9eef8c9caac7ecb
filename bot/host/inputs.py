"""The values a `Host` is built from, grouped by what they are: what thinks (prompt, model,
tools), the stores it keeps turns in, the rules a turn runs under, and the ways out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.agents import SOLO, Agent, Roster
from bot.memory.recall import RecallCache
from bot.policy.budget import NO_CAPS, Budgets, SpendCaps
from bot.policy.surfaces import Policies, SurfaceRule
from bot.ports.attachments import AttachmentReader
from bot.ports.cron import ChatSchedules
from bot.ports.delivery import Deliverer
from bot.ports.history import HistoryStore
from bot.ports.intake import Inbox, RequestCompleter, WorkShare
from bot.ports.memory import MemoryStore
from bot.ports.model import ModelRuntime
from bot.ports.outbox import Outbox
from bot.ports.tools import Tool
from bot.prompt import Assembler
from bot.turns import TurnRequest

# The tools a turn offers: its request, its recall cache, the surface rule that applies.
ToolsFor = Callable[[TurnRequest, RecallCache, SurfaceRule | None], Sequence[Tool]]


@dataclass(frozen=True, slots=True)
class Mind:
    """One agent's own: its assembler (its own agent-wide cached prefix) and its tools."""

    assembler: Assembler
    tools_for: ToolsFor


@dataclass(frozen=True, slots=True)
class Thinking:
    """What a model turn is made with: the default agent's assembler and tools, the model, the
    agents (`roster`) and each other agent's own `minds`."""

    assembler: Assembler
    model: ModelRuntime
    tools_for: ToolsFor
    roster: Roster = SOLO
    minds: Mapping[str, Mind] = field(default_factory=dict)

    def mind(self, agent: Agent) -> Mind:
        """The agent's assembler and tools (the default agent's are `assembler`, `tools_for`)."""
        return self.minds.get(agent.name) or Mind(self.assembler, self.tools_for)


@dataclass(frozen=True, slots=True)
class HostStores:
    """Where turns are kept: the conversation history, the durable inbox and outbox, long-term
    memory (None when off), attachments, chat schedules (None when off), and the `share` of
    replicas on one store (None for a single process)."""

    history: HistoryStore
    inbox: Inbox
    outbox: Outbox
    memory: MemoryStore | None = None
    attachments: AttachmentReader | None = None
    schedules: ChatSchedules | None = None
    share: WorkShare | None = None


@dataclass(frozen=True, slots=True)
class TurnRules:
    """What a turn runs under: the surface policies, the token budgets and spend caps, and the
    operators (who may manage others' schedules)."""

    policies: Policies | None = None
    budgets: Budgets | None = None
    caps: SpendCaps = NO_CAPS
    operators: frozenset[str] = frozenset()


NO_RULES = TurnRules()


@dataclass(frozen=True, slots=True)
class Outlets:
    """The ways out: one deliverer per platform, and the platforms whose stored requests leave
    names to look up at turn time."""

    deliverers: Mapping[str, Deliverer]
    completers: Mapping[str, RequestCompleter] = field(default_factory=dict)
