"""The host's own read-only tools, and the agent-wide list of their specs.

`load_skill` lets the model read the body of a skill that the index lists; `memory_recall` (in
`bot.recall`) searches long-term memory; `read_attachment` (in `bot.attachments.tool`) reads a
long shared text file. All are read-only: the model changes nothing with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.attachments.tool import READ_ATTACHMENT_SPEC
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.prompt import AgentTexts
from bot.prompt.skills import capped_body
from bot.recall import MEMORY_RECALL_SPEC

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


def tool_specs(agent: AgentTexts, *, memory: bool, attachments: bool = False) -> list[ToolSpec]:
    """The tools every request offers, in a fixed order so the request prefix stays cacheable."""
    specs = []
    if memory:
        specs.append(MEMORY_RECALL_SPEC)
    if any(skill.name not in agent.selected for skill in agent.skills):
        specs.append(LOAD_SKILL_SPEC)
    if attachments:
        specs.append(READ_ATTACHMENT_SPEC)
    return specs
