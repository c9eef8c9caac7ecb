"""Fixtures for the model runtime: the fake Anthropic server, a runtime on it, a tiny assembler.

The tiny assembler stands in for `bot.prompt`'s: one cached system block, history replayed as
messages (tool calls as tool_use / tool_result blocks) with a breakpoint on the last history
message, then the current user text. Time is fake: sleeps advance a clock and are recorded.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.cli.compose import client_tls
from bot.config import ModelSettings
from bot.model import AnthropicRuntime
from bot.model.wire import encode
from bot.ports.model import AssembledRequest, TurnPlan, TurnPrompt
from bot.ports.request import (
    Message,
    ModelRequest,
    Part,
    Section,
    Text,
    ToolCall,
    ToolDef,
    ToolResult,
)
from bot.ports.tools import Tool, ToolSpec
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRequest,
)
from tests.fakes.anthropic import FakeAnthropic, count_request

MODEL = "claude-test-1"
SYSTEM = "You are Testbot, a careful assistant for the test team. " * 40
# The tiny builders below build from the history alone; the plan still carries a prompt.
PROMPT = TurnPrompt(
    TurnRequest(
        "console:test", ConversationKind.PUSH, "console", "", datetime(2026, 1, 1, tzinfo=UTC), "t"
    ),
    "",
)


class FakeTime:
    """An injectable clock and sleep: sleeping only moves the clock and is recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def entry_message(entry: HistoryEntry) -> Message:
    parts: list[Part] = []
    for block in entry.blocks:
        if isinstance(block, TextBlock):
            label = f"{entry.speaker}: " if entry.speaker else ""
            parts.append(Text(label + block.text))
        elif isinstance(block, ToolUseBlock):
            parts.append(ToolCall(block.id, block.name, block.input))
        elif isinstance(block, ToolResultBlock):
            parts.append(ToolResult(block.tool_use_id, block.content, block.is_error))
    return Message(entry.role, tuple(parts))


def make_assemble(
    text: str, tools: Sequence[Tool] = (), max_tokens: int = 1024
) -> Callable[[Sequence[HistoryEntry]], AssembledRequest]:
    def assemble(history: Sequence[HistoryEntry]) -> AssembledRequest:
        messages = [entry_message(entry) for entry in history]
        if messages:
            messages[-1] = replace(messages[-1], cache="5m")
        messages.append(Message("user", (Text(text),)))
        request = ModelRequest(
            model=MODEL,
            max_tokens=max_tokens,
            sections=(Section(SYSTEM, cache="5m"),),
            messages=tuple(messages),
            tools=tuple(
                ToolDef(t.spec.name, t.spec.description, dict(t.spec.input_schema)) for t in tools
            ),
        )
        return AssembledRequest(request, count_request(encode(request)), len(history))

    return assemble


class Builder:
    """A `PromptBuilder` over a function of the history alone (its text and tools fixed)."""

    def __init__(self, assemble: Callable[[Sequence[HistoryEntry]], AssembledRequest]) -> None:
        self._assemble = assemble

    def build(self, prompt: TurnPrompt, history: Sequence[HistoryEntry], /) -> AssembledRequest:
        return self._assemble(history)


def plan(
    text: str,
    history: Sequence[HistoryEntry] = (),
    tools: Sequence[Tool] = (),
    **kwargs: Any,
) -> TurnPlan:
    return TurnPlan(
        turn_id="turn-1",
        conversation_key="console:test",
        history=tuple(history),
        prompt=PROMPT,
        builder=Builder(make_assemble(text, tools)),
        tools=tuple(tools),
        **kwargs,
    )


class RecordingTool:
    """A real Tool: answers from a function and records every call's arguments."""

    def __init__(self, name: str, answer: Callable[[dict[str, Any]], str]) -> None:
        self.spec = ToolSpec(
            name=name,
            description=f"The {name} test tool.",
            input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
        )
        self.calls: list[dict[str, Any]] = []
        self._answer = answer

    async def __call__(self, arguments: Any) -> str:
        self.calls.append(dict(arguments))
        return self._answer(dict(arguments))


@pytest.fixture
def fake(claude: FakeAnthropic) -> FakeAnthropic:
    """This package's name for the shared fake Messages API (tests/conftest.py)."""
    return claude


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def make_runtime(fake: FakeAnthropic, fake_time: FakeTime) -> Callable[..., AnthropicRuntime]:
    """Build runtimes on the fake; closed at teardown by the fixture's caller (`runtime`)."""

    def build(**settings: Any) -> AnthropicRuntime:
        values: dict[str, Any] = {"name": MODEL, "base_url": fake.base_url, **settings}
        return AnthropicRuntime(
            ModelSettings(**values),
            "sk-test-key",
            sleep=fake_time.sleep,
            clock=fake_time.clock,
            rng=random.Random(7),
            tls=client_tls(),  # as the App passes it (the process's one context)
        )

    return build


@pytest.fixture
async def runtime(make_runtime: Callable[..., AnthropicRuntime]) -> AsyncIterator[AnthropicRuntime]:
    built = make_runtime()
    yield built
    await built.aclose()
