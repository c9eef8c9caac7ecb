"""Cost breakers in the tool loop (SPEC §17): a token cap per turn, and a repeated tool call."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import BreakerTripped
from bot.model import AnthropicRuntime
from bot.model.breakers import call_key
from bot.ports.model import Breakers
from bot.turns import ToolUseBlock
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.model.conftest import RecordingTool, plan


def lookup() -> RecordingTool:
    return RecordingTool("lookup", lambda args: f"nothing new about {args.get('query')}")


def same_call() -> Reply:
    return Reply(text="Checking again.", tool_calls=[ToolCall("lookup", {"query": "status"})])


async def test_a_fourth_identical_tool_call_stops_the_turn_before_it_runs(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = lookup()
    fake.script(*[same_call() for _ in range(6)])
    with pytest.raises(BreakerTripped) as caught:
        await runtime.run(plan("status?", tools=[tool], breakers=Breakers(repeats=3)))

    stopped = caught.value
    assert tool.calls == [{"query": "status"}] * 3  # the fourth never ran
    assert len(fake.requests) == 4  # the call that asked for the fourth, and no call after it
    assert stopped.breaker == "repeat"
    assert stopped.code == "breaker:repeat"
    assert "'lookup'" in str(stopped)
    assert stopped.spend.usage is not None
    assert stopped.spend.usage.total > 0
    assert [e.role for e in stopped.entries] == ["assistant", "user"] * 3
    assert [call["tool"] for call in stopped.spend.tool_calls] == ["lookup"] * 3
    assert stopped.reply is not None
    assert "same step" in stopped.reply


async def test_different_arguments_are_different_calls(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = lookup()
    fake.script(
        *[Reply(tool_calls=[ToolCall("lookup", {"query": f"q{n}"})]) for n in range(5)],
        "Done.",
    )
    outcome = await runtime.run(plan("go", tools=[tool], breakers=Breakers(repeats=1)))
    assert outcome.text == "Done."
    assert len(tool.calls) == 5


async def test_identical_calls_in_one_round_count_together(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = lookup()
    call = ToolCall("lookup", {"query": "x"})
    fake.script(Reply(tool_calls=[call, call]), "unreached")
    with pytest.raises(BreakerTripped):
        await runtime.run(plan("go", tools=[tool], breakers=Breakers(repeats=1)))
    assert tool.calls == []


async def test_a_turn_stops_before_a_call_that_would_pass_its_token_cap(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    tool = lookup()
    fake.script(*[Reply(tool_calls=[ToolCall("lookup", {"query": f"q{n}"})]) for n in range(30)])
    first = plan("go", tools=[tool])
    estimated = first.builder.build(first.prompt, ()).estimated_tokens
    cap = estimated * 3  # room for about two calls: each resends what the last read and wrote
    with pytest.raises(BreakerTripped) as caught:
        await runtime.run(plan("go", tools=[tool], breakers=Breakers(cap, "run")))

    stopped = caught.value
    assert stopped.breaker == "tokens"
    assert stopped.code == "breaker:run"
    assert stopped.spend.usage is not None
    assert stopped.spend.usage.total <= cap
    assert 1 <= len(fake.requests) < 30
    assert stopped.reply is not None
    assert str(cap) in stopped.reply


async def test_a_request_larger_than_the_cap_makes_no_call_at_all(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.script("unreached")
    with pytest.raises(BreakerTripped) as caught:
        await runtime.run(plan("hello", breakers=Breakers(0, "day")))
    assert fake.requests == []
    assert caught.value.code == "breaker:day"


async def test_without_breakers_a_long_tool_loop_runs_to_the_round_limit(
    make_runtime: Callable[..., AnthropicRuntime], fake: FakeAnthropic
) -> None:
    runtime = make_runtime(max_turns=5)
    try:
        tool = lookup()
        fake.script(*[same_call() for _ in range(5)], "Stopping here.")
        outcome = await runtime.run(plan("status?", tools=[tool]))
    finally:
        await runtime.aclose()
    assert len(tool.calls) == 5
    assert "Stopping here." in outcome.text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5), st.randoms())
def test_a_calls_identity_ignores_key_order(
    arguments: dict[str, object], rng: random.Random
) -> None:
    keys = list(arguments)
    rng.shuffle(keys)
    shuffled = {key: arguments[key] for key in keys}
    first = call_key(ToolUseBlock("a", "lookup", arguments))
    assert first == call_key(ToolUseBlock("b", "lookup", shuffled))
    assert first != call_key(ToolUseBlock("a", "lookup2", arguments))
