"""The host's read-only tools: `load_skill`, and the toolbox that lists specs and tools once."""

from __future__ import annotations

import pytest

from bot.attachments.tool import READ_ATTACHMENT_SPEC
from bot.errors import ToolError
from bot.memory.recall import MEMORY_RECALL_SPEC, RecallCache
from bot.ports.memory import MemoryScope
from bot.prompt import AgentTexts, Skill
from bot.tools.toolbox import LOAD_SKILL_SPEC, LoadSkillTool, Toolbox
from tests.prompt.builders import console_request

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
    assert Toolbox(AGENT, skill_max_bytes=256, memory=True).specs == [
        MEMORY_RECALL_SPEC,
        LOAD_SKILL_SPEC,
    ]
    all_selected = AgentTexts("rules", "identity", (SHORT,), selected=("standup",))
    assert Toolbox(all_selected, skill_max_bytes=256, memory=False).specs == []
    assert not LoadSkillTool(all_selected, max_bytes=48_000).available


@pytest.mark.parametrize("memory", [True, False])
@pytest.mark.parametrize("attachments", [True, False])
def test_a_turn_gets_a_tool_for_every_spec_offered_in_the_same_order(
    memory: bool, attachments: bool
) -> None:
    toolbox = Toolbox(AGENT, skill_max_bytes=256, memory=memory, attachments=attachments)
    recall = RecallCache(None, MemoryScope("console:5b0c"), render=lambda hits: "")
    tools = toolbox.for_turn(console_request(), recall)
    assert [tool.spec for tool in tools] == toolbox.specs
    assert (READ_ATTACHMENT_SPEC in toolbox.specs) is attachments


async def test_read_attachment_without_a_file_store_says_so() -> None:
    toolbox = Toolbox(AGENT, skill_max_bytes=256, memory=False, attachments=True)
    recall = RecallCache(None, MemoryScope("console:5b0c"), render=lambda hits: "")
    (reader,) = [
        t for t in toolbox.for_turn(console_request(), recall) if t.spec.name == "read_attachment"
    ]
    with pytest.raises(ToolError, match="not kept on this store"):
        await reader({"id": "abc"})
