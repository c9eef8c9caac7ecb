"""Tool rounds: results for every call, history entries, breakpoints, the round cap, big output."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bot.errors import ToolError
from bot.model import AnthropicRuntime
from bot.model.tooloutput import TOOL_OUTPUT_MAX_BYTES, bound_tool_output
from bot.model.wire import count_breakpoints
from bot.ports.request import Section
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.model.conftest import Builder, RecordingTool, make_assemble, plan


def recall_tool() -> RecordingTool:
    return RecordingTool("memory_recall", lambda args: f"memory about {args.get('query')}")


async def test_two_recalls_then_an_answer(runtime: AnthropicRuntime, fake: FakeAnthropic) -> None:
    tool = recall_tool()
    fake.script(
        Reply(text="Let me check.", tool_calls=[ToolCall("memory_recall", {"query": "deploy"})]),
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "owner"})]),
        "Alice owns the deploy, which runs at nine.",
    )
    outcome = await runtime.run(plan("Who owns the deploy?", tools=[tool]))

    assert outcome.text == "Alice owns the deploy, which runs at nine."
    assert tool.calls == [{"query": "deploy"}, {"query": "owner"}]
    roles = [e.role for e in outcome.entries]
    assert roles == ["assistant", "user", "assistant", "user", "assistant"]
    first_call = outcome.entries[0].blocks
    assert first_call[0] == TextBlock("Let me check.")
    assert isinstance(first_call[1], ToolUseBlock)
    result = outcome.entries[1].blocks[0]
    assert isinstance(result, ToolResultBlock)
    assert result.tool_use_id == first_call[1].id
    assert result.content == "memory about deploy"
    assert not result.is_error

    # Each round sends the previous rounds back, tool calls answered by their results.
    third = fake.requests[2]["messages"]
    assert [m["role"] for m in third[-4:]] == ["assistant", "user", "assistant", "user"]
    assert third[-1]["content"][0]["tool_use_id"] == outcome.entries[2].blocks[0].id  # type: ignore[union-attr]


async def test_next_turn_replays_the_tool_entries(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = recall_tool()
    fake.script(
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "a"})]),
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "b"})]),
        "done",
    )
    outcome = await runtime.run(plan("first", tools=[tool]))
    user = HistoryEntry("user", (TextBlock("first"),), speaker="Alice (@alice)")
    history = [user, *outcome.entries]

    await runtime.run(plan("second", history=history, tools=[tool]))

    replayed = fake.requests[-1]["messages"]
    kinds = [[b["type"] for b in m["content"]] for m in replayed]
    assert kinds == [
        ["text"],
        ["tool_use"],
        ["tool_result"],
        ["tool_use"],
        ["tool_result"],
        ["text"],
        ["text"],
    ]
    assert replayed[2]["content"][0]["tool_use_id"] == replayed[1]["content"][0]["id"]
    assert replayed[2]["content"][0]["content"] == "memory about a"


async def test_round_breakpoint_moves_forward_within_the_limit(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = recall_tool()
    history = [
        HistoryEntry("user", (TextBlock("earlier question"),)),
        HistoryEntry("assistant", (TextBlock("earlier answer"),)),
    ]
    fake.script(
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "a"})]),
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "b"})]),
        "done",
    )
    await runtime.run(plan("now", history=history, tools=[tool]))

    for body in fake.requests:
        assert count_breakpoints(body) <= 4
    second, third = fake.requests[1]["messages"], fake.requests[2]["messages"]
    assert "cache_control" in second[-1]["content"][-1]
    assert "cache_control" in third[-1]["content"][-1]
    # The previous round's breakpoint is gone from the replayed message: only the newest stays.
    assert all("cache_control" not in b for b in third[-3]["content"])
    # The assembler's history breakpoint is untouched while there is room.
    assert "cache_control" in third[1]["content"][-1]


async def test_rounds_give_way_when_the_assembler_used_every_breakpoint(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = recall_tool()
    base = make_assemble("now", [tool])

    def four_breakpoints(history: Any) -> Any:
        built = base(history)
        sections = tuple(Section(f"part {i}", cache="5m") for i in range(3))
        request = replace(built.request, sections=sections)
        return type(built)(request, built.estimated_tokens, built.history_used)

    history = [
        HistoryEntry("user", (TextBlock("q"),)),
        HistoryEntry("assistant", (TextBlock("a"),)),
    ]
    fake.script(Reply(tool_calls=[ToolCall("memory_recall", {"query": "a"})]), "done")
    await runtime.run(replace(plan("now", history, [tool]), builder=Builder(four_breakpoints)))
    assert count_breakpoints(fake.requests[0]) == 4
    second = fake.requests[1]
    assert count_breakpoints(second) == 4
    assert "cache_control" in second["messages"][-1]["content"][-1]
    assert "cache_control" not in second["messages"][1]["content"][-1]


async def test_unknown_and_failing_tools_get_error_results(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    def broken(args: dict[str, Any]) -> str:
        raise ToolError("the index is unavailable")

    def crashing(args: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    tools = [RecordingTool("memory_recall", broken), RecordingTool("crash", crashing)]
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("memory_recall", {"query": "x"}),
                ToolCall("crash", {}),
                ToolCall("launch_rockets", {}),
            ]
        ),
        "Sorry, I could not look that up.",
    )
    outcome = await runtime.run(plan("q", tools=tools))

    results = [b for b in outcome.entries[1].blocks if isinstance(b, ToolResultBlock)]
    assert len(results) == len(outcome.entries[1].blocks) == 3
    recall, crash, unknown = results
    assert recall.is_error
    assert recall.content == "the index is unavailable"
    assert crash.is_error
    assert "RuntimeError: boom" in crash.content
    assert unknown.is_error
    assert "unknown tool 'launch_rockets'" in unknown.content
    sent = fake.requests[1]["messages"][-1]["content"]
    assert [b.get("is_error") for b in sent] == [True, True, True]
    assert outcome.text == "Sorry, I could not look that up."


async def test_round_cap_makes_a_last_call_without_tools(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(max_turns=2)
    tool = recall_tool()
    calls = [Reply(tool_calls=[ToolCall("memory_recall", {"query": str(i)})]) for i in range(2)]
    fake.script(*calls, "Here is what I found.")
    outcome = await runtime.run(plan("q", tools=[tool]))
    await runtime.aclose()

    assert len(tool.calls) == 2
    assert outcome.text == "Here is what I found."
    last = fake.requests[-1]
    assert last["tool_choice"] == {"type": "none"}
    assert "limit of 2 tool rounds" in last["messages"][-1]["content"][-1]["text"]
    assert "tool_choice" not in fake.requests[0]


async def test_round_cap_ends_honestly_when_the_model_insists(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(max_turns=1)
    tool = recall_tool()
    insist = Reply(text="One more look.", tool_calls=[ToolCall("memory_recall", {"query": "x"})])
    fake.script(insist, insist)
    outcome = await runtime.run(plan("q", tools=[tool]))
    await runtime.aclose()

    assert len(tool.calls) == 1
    assert outcome.text.startswith("One more look.")
    assert "limit of 1 tool rounds" in outcome.text
    final = outcome.entries[-1]
    assert all(isinstance(b, TextBlock) for b in final.blocks)  # no call left without a result


async def test_no_cap_when_max_turns_is_zero(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(max_turns=0)
    tool = recall_tool()
    fake.script(*[Reply(tool_calls=[ToolCall("memory_recall", {"query": "x"})])] * 30, "ok")
    outcome = await runtime.run(plan("q", tools=[tool]))
    await runtime.aclose()
    assert len(tool.calls) == 30
    assert outcome.text == "ok"


async def test_huge_tool_output_is_sampled(runtime: AnthropicRuntime, fake: FakeAnthropic) -> None:
    huge = "é" * 200_000 + "MIDDLE" + "ü" * 200_000
    tool = RecordingTool("memory_recall", lambda args: huge)
    fake.script(Reply(tool_calls=[ToolCall("memory_recall", {})]), "ok")
    outcome = await runtime.run(plan("q", tools=[tool]))
    result = outcome.entries[1].blocks[0]
    assert isinstance(result, ToolResultBlock)
    assert len(result.content.encode()) <= TOOL_OUTPUT_MAX_BYTES
    assert "MIDDLE" not in result.content
    assert "bytes omitted" in result.content
    assert fake.requests[1]["messages"][-1]["content"][0]["content"] == result.content


@given(st.text(min_size=1, max_size=40), st.integers(1, 300), st.integers(0, 3000))
def test_bound_tool_output_is_utf8_safe_and_bounded(chunk: str, repeats: int, limit: int) -> None:
    text = chunk * repeats
    data = text.encode()
    bounded = bound_tool_output(text, limit=limit + 512)
    out = bounded.encode()
    if len(data) <= limit + 512:
        assert bounded == text
        return
    assert len(out) <= limit + 512
    match = re.match(
        rb"\[tool output too long: (\d+) bytes; "
        rb"showing the first (\d+) and the last (\d+) bytes\]\n",
        out,
    )
    assert match is not None
    head_size, tail_size = int(match.group(2)), int(match.group(3))
    head = out[match.end() : match.end() + head_size]
    tail = out[len(out) - len("\n[end of sampled tool output]") - tail_size :][:tail_size]
    assert data.startswith(head)
    assert data.endswith(tail)
    head.decode(), tail.decode()  # whole characters only: these raise on a cut one
    assert head_size <= int(limit * 0.6)
    assert head_size + tail_size >= limit - 3  # only boundary bytes are lost from the budget
