"""The runtime driven by the real prompt Assembler: tool replay and breakpoints."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from bot.config import ModelSettings
from bot.memory.recall import MEMORY_RECALL_SPEC
from bot.model import AnthropicRuntime
from bot.model.wire import count_breakpoints
from bot.ports.model import TurnPlan
from bot.prompt import AgentTexts, Assembler, ModelLimits, Skill, TokenCounter
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    Speaker,
    Surface,
    SurfaceKind,
    ToolResultBlock,
    TurnRequest,
)
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.model.conftest import MODEL, RecordingTool

AGENT = AgentTexts(
    "# Ground rules\n\nBe honest and brief.",
    "# Identity\n\nYou are Quill, the team's assistant.",
    (Skill("standup", "Write the daily standup note.", "Yesterday, today, blockers."),),
    ("standup",),
)


def request(text: str, minute: int) -> TurnRequest:
    return TurnRequest(
        conversation_key="slack:T1:C1:1700000000.000100",
        kind=ConversationKind.PUSH,
        channel="slack",
        text=text,
        received_at=datetime(2026, 3, 17, 9, minute, tzinfo=UTC),
        turn_id=f"turn-{minute}",
        speaker=Speaker("Alice Chen", "alice"),
        surface=Surface(SurfaceKind.CHANNEL, "C1", "platform", shared=True),
    )


def plan_for(
    assembler: Assembler, turn: TurnRequest, history: Sequence[HistoryEntry], tool: RecordingTool
) -> TurnPlan:
    prompt = assembler.prepare(turn, history).prompt
    return TurnPlan(turn.turn_id, turn.conversation_key, tuple(history), prompt, assembler, (tool,))


async def test_tool_rounds_replay_through_the_real_assembler(fake: FakeAnthropic) -> None:
    counter = TokenCounter()
    assembler = Assembler(
        AGENT,
        ModelLimits(MODEL, 1024, 200_000),
        timezone="UTC",
        counter=counter,
        tools=(MEMORY_RECALL_SPEC,),
    )
    runtime = AnthropicRuntime(ModelSettings(name=MODEL, base_url=fake.base_url), "k", counter)
    tool = RecordingTool("memory_recall", lambda args: f"remembered: {args['query']}")
    fake.script(
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "deploy"})]),
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "owner"})]),
        "Alice owns the deploy.",
    )
    first = request("Who owns the deploy?", 1)
    outcome = await runtime.run(plan_for(assembler, first, [], tool))
    assert all(count_breakpoints(body) <= 4 for body in fake.requests)
    assert all(entry.tokens > 0 for entry in outcome.entries)  # cached estimates

    history = [assembler.user_entry(first), *outcome.entries]
    await runtime.run(plan_for(assembler, request("Thanks! And the schedule?", 2), history, tool))
    await runtime.aclose()

    replayed = fake.requests[-1]["messages"]
    kinds = [b["type"] for m in replayed for b in m["content"]]
    assert kinds.count("tool_use") == 2
    assert kinds.count("tool_result") == 2
    results = [b for m in replayed for b in m["content"] if b["type"] == "tool_result"]
    stored = [b for e in outcome.entries for b in e.blocks if isinstance(b, ToolResultBlock)]
    assert [r["tool_use_id"] for r in results] == [s.tool_use_id for s in stored]
    assert count_breakpoints(fake.requests[-1]) <= 4
