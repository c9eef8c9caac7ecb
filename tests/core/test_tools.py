"""The host's read-only tools: `load_skill`, and the agent-wide list of tool specs."""

from __future__ import annotations

import pytest

from bot.errors import ToolError
from bot.prompt import AgentTexts, Skill
from bot.recall import MEMORY_RECALL_SPEC
from bot.tools import LOAD_SKILL_SPEC, LoadSkillTool, tool_specs

LONG = Skill("triage", "Sort incoming bugs.", "é" * 400)  # 800 bytes of UTF-8
SHORT = Skill("standup", "Run the standup.", "Ask each person three questions.")
AGENT = AgentTexts("rules", "identity", (LONG, SHORT), selected=("standup",))


async def test_load_skill_returns_an_indexed_skill_capped_like_a_selected_one() -> None:
    body = await LoadSkillTool(AGENT, max_bytes=256)({"name": "triage"})
    assert body.startswith("é" * 128)
    assert "é" * 129 not in body
    assert "cut here" in body


async def test_load_skill_refuses_unknown_and_selected_skills() -> None:
    tool = LoadSkillTool(AGENT, max_bytes=48_000)
    with pytest.raises(ToolError, match=r"known: triage"):
        await tool({"name": "standup"})  # already in the system prompt
    with pytest.raises(ToolError, match="no skill named 'nope'"):
        await tool({"name": "nope"})


def test_tool_specs_follow_memory_and_the_index() -> None:
    assert tool_specs(AGENT, memory=True) == [MEMORY_RECALL_SPEC, LOAD_SKILL_SPEC]
    all_selected = AgentTexts("rules", "identity", (SHORT,), selected=("standup",))
    assert tool_specs(all_selected, memory=False) == []
    assert not LoadSkillTool(all_selected, max_bytes=48_000).available
