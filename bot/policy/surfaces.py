"""Surface rules (`[[surfaces]]`): which rule applies to a turn, and what it sets.

A rule matches by platform (the channel name: `slack`, `telegram`, `console`, `cron`, `webhook`,
or `*` for any) and optionally by surface kind (`dm`, `channel`, `group`) and exact surface id.
The most specific matching rule applies, whole (rules do not merge): an exact id beats a kind,
a kind beats a platform alone, a platform beats `*`; among equals the first in the file wins.

A rule may set `instructions` (text, or `instructions_path` to a file), `model`, `max_tokens`,
`skills` (whose bodies ride the session block, so the agent-wide prompt prefix stays the same
bytes for every surface), a daily `budget`, `tools` (globs over the tool names the model sees,
`offered_tools`: least privilege per surface), `agents` (who may answer there, SPEC §15) and
`busy` (what a message that arrives while the conversation's turn runs does, SPEC §19:
`bot.host.busy`). Reading the instruction files is the
only I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.errors import PolicyError
from bot.policy.budget import BudgetLimits
from bot.policy.models import ModelSpec
from bot.ports.model import ModelRef
from bot.turns import TurnRequest

INSTRUCTIONS_MAX_BYTES = 64 * 1024
ANY_PLATFORM = "*"
# The channel names a turn can carry (`TurnRequest.channel`), and `*`: a rule naming anything
# else would silently never apply, so it is refused when the config is read.
PLATFORMS = ("slack", "telegram", "console", "cron", "webhook", ANY_PLATFORM)
# The host's own read-only tools: what a surface without a `tools` rule is offered.
BUILTIN_TOOLS = frozenset({"memory_recall", "read_attachment", "load_skill"})
# A tool glob: the characters of tool names (`server__tool`) and the glob's own (`*`, `?`, `[]`).
TOOL_GLOB = r"^[A-Za-z0-9_.\-*?\[\]!]{1,128}$"
AGENT_NAME = r"^[a-z][a-z0-9_-]{0,31}$"  # an [[agents]] name, addressed as @name
AgentName = Annotated[str, Field(pattern=AGENT_NAME)]
APPROVER = r"^(slack|telegram):[A-Za-z0-9_.-]{1,64}$"  # platform:person id (SPEC §14)
# A message that arrives while its conversation's turn runs (SPEC §19): its own turn after this
# one, one turn with every other that arrived meanwhile, added to the running turn, or stopping it.
BusyMode = Literal["queue", "collect", "steer", "interrupt"]


def _thinking_budget(value: int) -> int:
    if 0 < value < THINKING_MIN:
        raise ValueError(
            f"{value} is below the API's minimum thinking budget; write 0 (no extended "
            f"thinking) or at least {THINKING_MIN}"
        )
    return value


THINKING_MIN = 1024  # the Messages API's smallest `budget_tokens`
# Tokens the model may think in before it answers (Anthropic's extended thinking); 0: none.
ThinkingBudget = Annotated[int, Field(ge=0, le=64_000), AfterValidator(_thinking_budget)]


class SurfaceRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    platform: str
    kind: Literal["dm", "channel", "group"] | None = None
    id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    instructions: Annotated[str, Field(max_length=INSTRUCTIONS_MAX_BYTES)] | None = None
    instructions_path: Path | None = None
    # "NAME", "PROVIDER:NAME", or { name = ..., fallbacks = [...], context_window, capabilities }
    model: ModelSpec | None = None
    max_tokens: Annotated[int, Field(ge=1, le=128_000)] | None = None
    thinking_budget: ThinkingBudget | None = None  # None: [model] thinking_budget
    skills: list[str] = []
    budget: BudgetLimits | None = None
    # None: the built-in tools only; a list: exactly the tools whose names match one of its globs.
    tools: list[Annotated[str, Field(pattern=TOOL_GLOB)]] | None = None
    # None: `[approvals] approvers`; a list: who decides approvals asked for on these surfaces.
    approvers: list[Annotated[str, Field(pattern=APPROVER)]] | None = None
    busy: BusyMode = "queue"
    # Who may answer here (`[[agents]]` names); the first answers when nobody is named. None: the
    # default agent.
    agents: Annotated[list[AgentName], Field(min_length=1)] | None = None

    @field_validator("platform")
    @classmethod
    def _known_platform(cls, platform: str) -> str:
        if platform not in PLATFORMS:
            known = ", ".join(f'"{name}"' for name in PLATFORMS)
            raise ValueError(
                f"platform {platform!r} is not a channel this host runs, so the rule would never "
                f"apply. Fix: use one of {known}"
            )
        return platform

    @model_validator(mode="after")
    def _one_instructions_source(self) -> SurfaceRule:
        if self.instructions is not None and self.instructions_path is not None:
            raise ValueError(
                "set either instructions (the text) or instructions_path (a file), not both"
            )
        return self

    @property
    def specificity(self) -> int:
        if self.id is not None:
            return 3
        if self.kind is not None:
            return 2
        return 1 if self.platform != ANY_PLATFORM else 0

    def matches(self, request: TurnRequest) -> bool:
        if self.platform not in (ANY_PLATFORM, request.channel):
            return False
        surface = request.surface
        if self.kind is not None and (surface is None or surface.kind.value != self.kind):
            return False
        return self.id is None or (surface is not None and surface.id == self.id)

    def describe(self, index: int) -> str:
        parts = [f"platform {self.platform}"]
        if self.kind is not None:
            parts.append(f"kind {self.kind}")
        if self.id is not None:
            parts.append(f"id {self.id}")
        return f"surfaces[{index}] ({', '.join(parts)})"


@dataclass(frozen=True)
class SurfacePolicy:
    """What applies to one turn: the rule (if any) with its instructions read."""

    index: int | None = None
    rule: SurfaceRule | None = None
    instructions: str = ""
    models: tuple[ModelRef, ...] = ()  # the rule's model and its fallbacks, resolved

    @property
    def label(self) -> str:
        if self.rule is None or self.index is None:
            return "none (no [[surfaces]] rule matches)"
        return self.rule.describe(self.index)

    @property
    def budget(self) -> BudgetLimits | None:
        return self.rule.budget if self.rule is not None else None

    @property
    def busy(self) -> BusyMode:
        return self.rule.busy if self.rule is not None else "queue"


NO_POLICY = SurfacePolicy()


def offered_tools(rule: SurfaceRule | None, names: Sequence[str]) -> tuple[str, ...]:
    """The names among `names` (every tool the host has, sorted) offered on a surface whose
    applying rule is `rule`: with a `tools` list, those matching one of its globs (case-sensitive,
    built-in tools included only when matched); without one (or no rule), the built-in tools.
    Keeps the order of `names`, so equal allowed sets give equal lists."""
    globs = rule.tools if rule is not None else None
    if globs is None:
        return tuple(name for name in names if name in BUILTIN_TOOLS)
    return tuple(name for name in names if any(fnmatchcase(name, glob) for glob in globs))


class Policies:
    """The configured rules, ready to match (instruction files already read)."""

    def __init__(
        self,
        rules: Sequence[SurfaceRule],
        instructions: Sequence[str],
        models: Sequence[tuple[ModelRef, ...]] = (),
    ) -> None:
        chains = list(models) or [()] * len(rules)
        ranked = sorted(range(len(rules)), key=lambda i: (-rules[i].specificity, i))
        self._ranked = [SurfacePolicy(i, rules[i], instructions[i], chains[i]) for i in ranked]

    def for_request(self, request: TurnRequest) -> SurfacePolicy:
        for policy in self._ranked:
            assert policy.rule is not None
            if policy.rule.matches(request):
                return policy
        return NO_POLICY

    @property
    def all(self) -> list[SurfacePolicy]:
        return sorted(self._ranked, key=lambda p: p.index or 0)


def load_policies(
    rules: Sequence[SurfaceRule], models: Sequence[tuple[ModelRef, ...]] = ()
) -> Policies:
    """Read every rule's instructions (text or file); `models`: each rule's model chain."""
    return Policies(rules, [_instructions(rule, i) for i, rule in enumerate(rules)], models)


def _instructions(rule: SurfaceRule, index: int) -> str:
    if rule.instructions_path is None:
        return (rule.instructions or "").strip()
    key = f"surfaces[{index}].instructions_path = '{rule.instructions_path}'"
    try:
        data = rule.instructions_path.read_bytes()
    except OSError as exc:
        raise PolicyError(
            f"{key}: cannot be read ({exc.strerror}). Fix: create the file, or point "
            "instructions_path at it (relative paths start at the config file's folder)."
        ) from None
    if len(data) > INSTRUCTIONS_MAX_BYTES:
        raise PolicyError(
            f"{key}: larger than {INSTRUCTIONS_MAX_BYTES} bytes. Fix: shorten it; it rides the "
            "session block of every conversation on that surface."
        )
    try:
        return data.decode("utf-8-sig").strip()
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"{key}: not valid UTF-8 (byte {exc.start}). Fix: save it as UTF-8."
        ) from None
