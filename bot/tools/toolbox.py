"""The host's tools, listed once in the `Toolbox`: its own read-only ones and those of MCP servers
(`extra`, from `bot.mcp`), and for each turn the ones its surface offers (`offered_tools`).

`load_skill` lets the model read the body of a skill that the index lists; `memory_recall` (in
`bot.memory.recall`) searches long-term memory; `read_attachment` (in `bot.attachments.tool`) reads
a long shared text file. All are read-only: the model changes nothing with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot.attachments.tool import READ_ATTACHMENT_SPEC, ReadAttachmentTool
from bot.errors import ToolError
from bot.memory.recall import MEMORY_RECALL_SPEC, RecallCache
from bot.policy.surfaces import SurfaceRule, offered_tools
from bot.ports.attachments import AttachmentStore
from bot.ports.tools import Tool, ToolSpec
from bot.prompt import AgentTexts
from bot.prompt.skills import capped_body
from bot.turns import TurnRequest

LOAD_SKILL_SPEC = ToolSpec(
    name="load_skill",
    description=(
        "Read the full instructions of one skill listed in the skill index. Use it when a "
        "listed skill fits the task; pass the skill's name exactly as the index shows it."
    ),
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the skill's name"}},
        "required": ["name"],
        "additionalProperties": False,
    },
)


class LoadSkillTool:
    """Returns the body of an indexed (not already selected) skill."""

    spec = LOAD_SKILL_SPEC

    def __init__(self, agent: AgentTexts, max_bytes: int) -> None:
        """`max_bytes` is agent.skill_max_bytes: a loaded body is capped like a selected one."""
        self._skills = {
            skill.name: skill for skill in agent.skills if skill.name not in agent.selected
        }
        self._max_bytes = max_bytes

    @property
    def available(self) -> bool:
        return bool(self._skills)

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        name = arguments.get("name")
        if not isinstance(name, str) or name not in self._skills:
            known = ", ".join(sorted(self._skills)) or "none"
            raise ToolError(f"no skill named {name!r} in the index (known: {known})")
        return capped_body(self._skills[name], self._max_bytes)


MakeTool = Callable[[TurnRequest, RecallCache], Tool]
# Tools beyond the host's own, read at each turn (an MCP server's list may change while running).
ToolSource = Callable[[], Sequence[Tool]]


class _NoFiles:
    """`read_attachment` where files are offered but not kept (the PostgreSQL store, for now)."""

    spec = READ_ATTACHMENT_SPEC

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        raise ToolError("shared files are not kept on this store, so none can be read")


class Toolbox:
    """The tools, listed once: `specs` are every definition (the assembler's estimate of their
    size) and `for_turn` gives the tools a surface offers, the host's own first in a fixed order,
    then the others sorted by name, so the same allowed set is the same request prefix."""

    def __init__(
        self,
        agent: AgentTexts,
        *,
        skill_max_bytes: int,
        memory: bool,
        attachments: bool = False,
        files: AttachmentStore | None = None,
        extra: ToolSource = tuple,
        own: Sequence[tuple[ToolSpec, MakeTool]] = (),
    ) -> None:
        """`files`: where shared files are kept (None: only the specs are needed, or the store
        keeps none). `extra`: the MCP servers' tools, sorted by name. `own`: more of the host's
        tools, made for each turn (the `schedule` tool)."""
        load_skill = LoadSkillTool(agent, skill_max_bytes)
        offered: list[tuple[ToolSpec, MakeTool]] = []
        if memory:
            offered.append((MEMORY_RECALL_SPEC, lambda request, recall: recall.tool()))
        if load_skill.available:
            offered.append((LOAD_SKILL_SPEC, lambda request, recall: load_skill))
        if attachments:
            offered.append((READ_ATTACHMENT_SPEC, lambda request, recall: _reader(files, request)))
        offered += own
        self._offered = offered
        self._extra = extra

    @property
    def specs(self) -> list[ToolSpec]:
        return [spec for spec, _ in self._offered] + [tool.spec for tool in self._extra()]

    def names(self) -> list[str]:
        """Every tool's name, sorted: what a surface rule's `tools` globs choose from."""
        return sorted(spec.name for spec in self.specs)

    def offered(self, rule: SurfaceRule | None) -> list[ToolSpec]:
        """The definitions a surface under `rule` is offered, in request order."""
        allowed = set(offered_tools(rule, self.names()))
        return [spec for spec in self.specs if spec.name in allowed]

    def for_turn(
        self, request: TurnRequest, recall: RecallCache, rule: SurfaceRule | None = None
    ) -> list[Tool]:
        """The tools this turn's surface offers (`rule`: the surface rule that applies), or those
        the request names (a scheduled job's). The host's own tools are made for the request as
        it is offered them (`TurnRequest.tools` set), so the `schedule` tool keeps them."""
        extra = list(self._extra())
        names = sorted([spec.name for spec, _ in self._offered] + [t.spec.name for t in extra])
        if request.tools is not None:
            allowed = set(request.tools) & set(names)
        else:
            allowed = set(offered_tools(rule, names))
        here = replace(request, tools=tuple(name for name in names if name in allowed))
        own = [make(here, recall) for spec, make in self._offered if spec.name in allowed]
        return own + [tool for tool in extra if tool.spec.name in allowed]


def _reader(files: AttachmentStore | None, request: TurnRequest) -> Tool:
    if files is None:
        return _NoFiles()
    return ReadAttachmentTool(files, request.conversation_key)
