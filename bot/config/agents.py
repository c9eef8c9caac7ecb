"""The `[[agents]]` entries and the `[handoffs]` table (SPEC §15): what each agent of the host
is configured with, what it inherits from `[agent]`, and the checks across entries and surface
rules (names unique, every agent a rule names known, no two rules tying over who answers)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.errors import ConfigError
from bot.policy.budget import BudgetLimits
from bot.policy.surfaces import AGENT_NAME, TOOL_GLOB, SurfaceRule

if TYPE_CHECKING:
    from bot.config.sections import AgentSettings

_NAME = re.compile(AGENT_NAME)
MemoryMode = Literal["own", "shared"]
# An icon: an image URL (https) or a Slack emoji code such as `:robot_face:`.
ICON = r"^(https://\S{1,500}|:[a-z0-9_+-]{1,64}:)$"


def check_agent_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(
            "not a usable agent name (people address it as @name). Fix: use a lowercase letter "
            "then up to 31 lowercase letters, digits, '_' or '-', e.g. \"ops\""
        )
    return value


class AgentEntry(BaseModel):
    """One `[[agents]]` entry; what it leaves unset it inherits from `[agent]` and `[model]`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    display_name: Annotated[str, Field(min_length=1, max_length=80)] | None = None
    icon: Annotated[str, Field(pattern=ICON)] | None = None
    identity_path: Path | None = None
    soul_path: Path | None = None
    skills_root: Path | None = None
    selected_skills: list[str] | None = None
    model: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    # Globs over tool names, intersected with the surface rule's (None: the rule's alone).
    tools: list[Annotated[str, Field(pattern=TOOL_GLOB)]] | None = None
    memory: MemoryMode = "shared"
    budget: BudgetLimits | None = None

    _name = field_validator("name")(check_agent_name)

    def settings(self, base: AgentSettings) -> AgentSettings:
        """`[agent]` with this entry's files in place of its own."""
        update: dict[str, object] = {
            key: value
            for key in ("identity_path", "soul_path", "skills_root", "selected_skills")
            if (value := getattr(self, key)) is not None
        }
        return base.model_copy(update=update)


class HandoffSettings(BaseModel):
    """`[handoffs]`: how far agents may pass a conversation between them before a person speaks
    (a table of its own: TOML cannot have `[agents]` beside `[[agents]]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_hops: Annotated[int, Field(ge=0, le=50)] = 3
    max_agent_turns_per_hour: Annotated[int, Field(ge=0, le=10_000)] = 20


def check_agents(agents: Sequence[AgentEntry], rules: Sequence[SurfaceRule]) -> None:
    """Raise ConfigError for two entries of one name, a rule naming no configured agent, or two
    rules for one place that both say who answers there."""
    seen: set[str] = set()
    for index, entry in enumerate(agents):
        if entry.name in seen:
            raise ConfigError(
                f"agents[{index}].name = {entry.name!r}: another [[agents]] entry has that name. "
                "Fix: give each agent its own name."
            )
        seen.add(entry.name)
    known = seen or {"default"}
    places: dict[tuple[str, str | None, str | None], int] = {}
    for index, rule in enumerate(rules):
        for name in rule.agents or ():
            if name not in known:
                raise ConfigError(
                    f"surfaces[{index}].agents: no agent named {name!r}. Fix: add an "
                    f"[[agents]] entry named {name!r} or use one of "
                    f"{', '.join(sorted(known))}."
                )
        if rule.agents is None:
            continue
        place = (rule.platform, rule.kind, rule.id)
        if place in places:
            raise ConfigError(
                f"surfaces[{index}] and surfaces[{places[place]}]: both say who answers on "
                f"{rule.describe(index).split(' ', 1)[1]}, so one would silently lose. Fix: "
                "merge their agents lists into one rule."
            )
        places[place] = index
