"""The OpenAI-compatible wire: the real `openai` SDK against the fake Chat Completions server —
streamed text and tool calls, usage with cached prompt tokens, the retry rules, compaction on a
context-length error, and a fallback from an overloaded Anthropic."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from bot.cli.compose import client_tls
from bot.config import ModelSettings
from bot.config.providers import Endpoint, ProviderSettings
from bot.errors import TurnFailed
from bot.model import ModelClient
from bot.model.compaction import SUMMARY_SYSTEM
from bot.turns import HistoryEntry, TextBlock
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI, Reply, ToolCall
from tests.model.conftest import MODEL, SYSTEM, FakeTime, RecordingTool, plan


@pytest.fixture
def make_client(gpt: FakeOpenAI, fake_time: FakeTime) -> Callable[..., ModelClient]:
    def build(key: str = "sk-openai-test", **settings: Any) -> ModelClient:
        values: dict[str, Any] = {
            "name": "qwen3-32b",
            "provider": "openai",
            "base_url": gpt.base_url,
            **settings,
        }
        return ModelClient(
            ModelSettings(**values),
            key,
            sleep=fake_time.sleep,
            clock=fake_time.clock,
            rng=random.Random(7),
            tls=client_tls(),
        )

    return build


async def test_a_streamed_answer_with_cached_prompt_tokens(
    make_client: Callable[..., ModelClient], gpt: FakeOpenAI
) -> None:
    client = make_client()
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    gpt.script("Friday, after the freeze.", "Second answer here.")
    earlier = [
        HistoryEntry("user", (TextBlock("the release checklist, item by item " * 150),)),
        HistoryEntry("assistant", (TextBlock("Noted."),)),
    ]
    first = await client.run(plan("When is the release?", earlier, on_text=on_text))
    second = await client.run(plan("And the one after?", earlier))
    await client.aclose()
    assert first.text == "Friday, after the freeze."
    assert len(deltas) > 1
    assert "".join(deltas) == first.text
    body = gpt.requests[0]
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}  # sections first
    assert body["messages"][-1] == {"role": "user", "content": "When is the release?"}
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 1024  # a compatible server's name for the limit
    # The second request repeats the system prefix byte for byte: served from cache.
    assert second.usage.cache_read_tokens >= 1024
    assert second.usage.cache_read_tokens % 128 == 0
    assert first.usage.cache_read_tokens == 0
    assert (
        second.usage.input_tokens + second.usage.cache_read_tokens
        == (gpt.usages[1]["prompt_tokens"])
    )


async def test_a_tool_call_streamed_in_pieces_runs_and_its_result_goes_back(
    make_client: Callable[..., ModelClient], gpt: FakeOpenAI
) -> None:
    client = make_client()
    lookup = RecordingTool("lookup", lambda arguments: f"found {arguments['query']}")
    gpt.script(
        Reply(tool_calls=[ToolCall("lookup", {"query": "release date ünïcode"})]),
        "It is on Friday.",
    )
    outcome = await client.run(plan("when?", tools=[lookup]))
    await client.aclose()
    assert lookup.calls == [{"query": "release date ünïcode"}]
    assert outcome.text == "It is on Friday."
    first, second = gpt.requests
    assert first["tools"][0]["function"]["name"] == "lookup"
    call, result = second["messages"][-2:]
    assert call["role"] == "assistant"
    [made] = call["tool_calls"]
    assert made["function"]["name"] == "lookup"
    assert result == {
        "role": "tool",
        "tool_call_id": made["id"],
        "content": "found release date ünïcode",
    }
    assert outcome.request is not None
    assert outcome.request["model"] == MODEL


async def test_429_waits_for_retry_after_and_500_is_retried(
    make_client: Callable[..., ModelClient], gpt: FakeOpenAI, fake_time: FakeTime
) -> None:
    client = make_client()
    gpt.fail(429, retry_after=3)
    gpt.fail(500)
    gpt.script("at last")
    outcome = await client.run(plan("hello"))
    await client.aclose()
    assert outcome.text == "at last"
    assert outcome.attempts == 3
    assert fake_time.sleeps[0] == 3.0


async def test_400_is_not_retried(make_client: Callable[..., ModelClient], gpt: FakeOpenAI) -> None:
    client = make_client()
    gpt.fail(400, message="bad request", code="invalid_value")
    with pytest.raises(TurnFailed):
        await client.run(plan("hello"))
    await client.aclose()
    assert len(gpt.requests) == 1


async def test_a_wrong_key_says_which_variable_to_fix(
    make_client: Callable[..., ModelClient],
) -> None:
    client = make_client(key="sk-wrong", api_key_env="LOCAL_API_KEY")
    with pytest.raises(TurnFailed) as failed:
        await client.run(plan("hello"))
    await client.aclose()
    assert "LOCAL_API_KEY" in str(failed.value)


async def test_a_context_length_error_compacts_the_history_and_retries(
    make_client: Callable[..., ModelClient], gpt: FakeOpenAI
) -> None:
    client = make_client()
    history = [
        HistoryEntry("user" if n % 2 == 0 else "assistant", (TextBlock(f"message {n}"),))
        for n in range(10)
    ]
    gpt.fail(400, message="This model's maximum context length is 100 tokens.", code=None)
    gpt.script("A summary of the older part.", "answered after compacting")
    outcome = await client.run(plan("and now?", history))
    await client.aclose()
    assert outcome.text == "answered after compacting"
    assert outcome.history is not None
    assert outcome.history[0].summary
    summary_request = gpt.requests[1]
    assert summary_request["messages"][0] == {"role": "system", "content": SUMMARY_SYSTEM}


async def test_an_overloaded_anthropic_falls_back_to_the_openai_model(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime
) -> None:
    settings = ModelSettings(
        name=MODEL, base_url=fake.base_url, max_retries=2, fallbacks=["local:qwen3-32b"]
    )
    local = ProviderSettings(wire="openai", base_url=gpt.base_url, api_key_env="LOCAL_API_KEY")
    [_, fallback] = settings.endpoints({"local": local})
    assert isinstance(fallback, Endpoint)
    assert fallback.model == "qwen3-32b"
    client = ModelClient(
        settings,
        "sk-ant-test",
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        rng=random.Random(7),
        providers={"local": local},
        keys={"LOCAL_API_KEY": "sk-openai-test"},
    )
    fake.fail(529, times=3)
    gpt.script("from the fallback")
    outcome = await client.run(plan("hello"))
    await client.aclose()
    assert outcome.text == "from the fallback"
    assert len(fake.requests) == 3  # every retry of the overload first
    assert [r["model"] for r in gpt.requests] == ["qwen3-32b"]
    assert outcome.request is not None
    assert outcome.request["model"] == "qwen3-32b"
