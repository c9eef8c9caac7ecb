"""Routes across wires, with both fakes on loopback and the real SDKs: a surface rule's model
(resolved by `bot.config.models`) takes the turn to its own wire; fallbacks are tried in order
after the retries of an overload, a 5xx or a timeout, never after a 400/401/403; the answering
model is what the outcome, the usage and the `model_call` line name; a fallback on the other wire
gets the same history, tool calls and results re-encoded for it."""

from __future__ import annotations

import base64
import json
import random
from dataclasses import replace
from typing import Any

import pytest
import structlog

from bot.config import ModelSettings
from bot.config.models import model_chain
from bot.config.providers import Capabilities, ProviderSettings
from bot.errors import TurnFailed
from bot.model import ModelClient
from bot.model.openai_wire import NO_IMAGES
from bot.policy.models import ModelChoice
from bot.ports.model import AssembledRequest, SurfacePrompt, TurnPlan
from bot.ports.request import Image, Message, ModelRequest, Section, Text
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI, Reply, ToolCall
from tests.model.conftest import MODEL, PROMPT, Builder, FakeTime, RecordingTool, plan

# An earlier turn that called a tool: what a fallback on the other wire must replay.
TOOL_HISTORY = (
    HistoryEntry("user", (TextBlock("look up the release"),)),
    HistoryEntry("assistant", (ToolUseBlock("toolu_01", "lookup", {"query": "release"}),)),
    HistoryEntry("user", (ToolResultBlock("toolu_01", "Friday"),)),
    HistoryEntry("assistant", (TextBlock("It is on Friday."),)),
)


def _client(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime, **model: Any
) -> tuple[ModelClient, ModelSettings, dict[str, ProviderSettings]]:
    settings = ModelSettings(name=MODEL, base_url=fake.base_url, max_retries=2, **model)
    providers = {
        "local": ProviderSettings(wire="openai", base_url=gpt.base_url, api_key_env="LOCAL_KEY"),
        "claude": ProviderSettings(wire="anthropic", base_url=fake.base_url),
    }
    client = ModelClient(
        settings,
        "sk-ant-test",
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        rng=random.Random(7),
        providers=providers,
        keys={"LOCAL_KEY": "sk-openai-test"},
    )
    return client, settings, providers


def _on_surface(
    turn: TurnPlan,
    choice: str | ModelChoice,
    settings: ModelSettings,
    providers: dict[str, ProviderSettings],
) -> TurnPlan:
    models = model_chain(choice, settings, providers, "surfaces[0].model")
    surface = SurfacePrompt(model=models[0].name, models=models)
    return replace(turn, prompt=replace(PROMPT, surface=surface))


async def test_a_surface_rules_model_takes_the_turn_to_its_wire(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime
) -> None:
    client, settings, providers = _client(fake, gpt, fake_time)
    gpt.script("from the local model")
    fake.script("from claude")
    local = await client.run(_on_surface(plan("hi"), "local:qwen3:32b", settings, providers))
    default = await client.run(plan("hi"))
    await client.aclose()
    assert local.text == "from the local model"
    assert default.text == "from claude"
    [sent] = gpt.requests
    assert sent["model"] == "qwen3:32b"  # Ollama's colon survives the provider prefix
    assert [r["model"] for r in fake.requests] == [MODEL]


async def test_an_openai_5xx_falls_back_to_anthropic_with_the_tool_history_re_encoded(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime
) -> None:
    client, settings, providers = _client(fake, gpt, fake_time)
    choice = ModelChoice(name="local:qwen3-32b", fallbacks=["claude:claude-haiku-4-5"])
    gpt.fail(500, times=3)
    fake.script("answered by the fallback")
    lookup = RecordingTool("lookup", lambda arguments: "unused")
    asked = plan("and the next one?", TOOL_HISTORY, tools=[lookup])
    turn = _on_surface(asked, choice, settings, providers)
    with structlog.testing.capture_logs() as logs:
        outcome = await client.run(turn)
    await client.aclose()
    assert outcome.text == "answered by the fallback"
    assert len(gpt.requests) == 3  # every retry of the 5xx first
    [sent] = fake.requests
    assert sent["model"] == "claude-haiku-4-5"
    assert outcome.request is not None
    assert outcome.request["model"] == "claude-haiku-4-5"
    call, result = sent["messages"][1]["content"][0], sent["messages"][2]["content"][0]
    assert call == {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "lookup",
        "input": {"query": "release"},
    }
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_01"
    # The OpenAI request carried the same history as function calls and a tool message.
    messages = gpt.requests[0]["messages"]
    [function_call] = messages[2]["tool_calls"]
    assert function_call["id"] == "toolu_01"
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_01", "content": "Friday"}
    [answered] = [e for e in logs if e["event"] == "model_call"]
    assert answered["model"] == "claude-haiku-4-5"
    [fell] = [e for e in logs if e["event"] == "model_fallback"]
    assert (fell["failed"], fell["next"]) == ("local:qwen3-32b", "claude:claude-haiku-4-5")
    assert outcome.usage.output_tokens > 0


async def test_a_tool_round_on_the_openai_fallback_of_an_overloaded_anthropic(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime
) -> None:
    client, _, _ = _client(fake, gpt, fake_time, fallbacks=["local:qwen3-32b"])
    lookup = RecordingTool("lookup", lambda arguments: f"found {arguments['query']}")
    fake.fail(529, times=100)
    gpt.script(Reply(tool_calls=[ToolCall("lookup", {"query": "date"})]), "Friday it is.")
    outcome = await client.run(plan("when?", TOOL_HISTORY, tools=[lookup]))
    await client.aclose()
    assert outcome.text == "Friday it is."
    assert lookup.calls == [{"query": "date"}]
    first, second = gpt.requests
    assert [m["role"] for m in first["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    [made] = second["messages"][-2]["tool_calls"]
    assert second["messages"][-1]["tool_call_id"] == made["id"]
    assert outcome.request is not None
    assert outcome.request["model"] == "qwen3-32b"


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_a_refusal_or_a_key_problem_never_falls_back(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime, status: int
) -> None:
    client, settings, providers = _client(fake, gpt, fake_time)
    choice = ModelChoice(name="local:qwen3-32b", fallbacks=["claude:claude-haiku-4-5"])
    gpt.fail(status, message="no", code="invalid_value")
    with pytest.raises(TurnFailed) as failed:
        await client.run(_on_surface(plan("hi"), choice, settings, providers))
    await client.aclose()
    assert fake.requests == []
    assert len(gpt.requests) == 1
    if status == 401:
        assert "LOCAL_KEY" in str(failed.value)  # the failing model's own key variable


async def test_a_rule_without_fallbacks_has_none(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime
) -> None:
    client, settings, providers = _client(fake, gpt, fake_time, fallbacks=["claude:x"])
    choice = ModelChoice(name="local:qwen3-32b", fallbacks=[])
    gpt.fail(500, times=10)
    with pytest.raises(TurnFailed):
        await client.run(_on_surface(plan("hi"), choice, settings, providers))
    await client.aclose()
    assert fake.requests == []  # data meant for the local model stays there


def _with_image() -> Builder:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode("ascii")
    request = ModelRequest(
        model=MODEL,
        max_tokens=256,
        sections=(Section("You are a test."),),
        messages=(Message("user", (Text("what is this?"), Image("image/png", png))),),
    )
    return Builder(lambda history: AssembledRequest(request, 100, 0))


@pytest.mark.parametrize("provider", ["local", "claude"])
async def test_a_model_without_images_gets_a_marker_on_either_wire(
    fake: FakeAnthropic, gpt: FakeOpenAI, fake_time: FakeTime, provider: str
) -> None:
    client, settings, providers = _client(fake, gpt, fake_time)
    choice = ModelChoice(name=f"{provider}:m1", capabilities=Capabilities(images=False))
    gpt.script("a text-only answer")
    fake.script("a text-only answer")
    turn = replace(plan("ignored"), builder=_with_image())
    outcome = await client.run(_on_surface(turn, choice, settings, providers))
    await client.aclose()
    assert outcome.text == "a text-only answer"
    [sent] = gpt.requests if provider == "local" else fake.requests
    said = json.dumps(sent)
    assert "base64" not in said
    assert NO_IMAGES in said
    assert "what is this?" in said
