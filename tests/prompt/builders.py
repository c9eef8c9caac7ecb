"""Builders for prompt tests: an agent, an assembler, requests for each channel, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.model.wire import encode
from bot.ports.memory import MemoryHit
from bot.ports.model import AssembledRequest
from bot.ports.tools import ToolSpec
from bot.prompt import AgentTexts, Assembler, ModelLimits, Skill, Template, Templates, TokenCounter
from bot.prompt.template import DEFAULT_SESSION_TEMPLATE
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRequest,
)


def wire_body(assembled: AssembledRequest) -> dict[str, Any]:
    """The request as the Anthropic wire sends it (what these tests were written against)."""
    return encode(assembled.request)


CLOCK = datetime(2026, 3, 17, 9, 30, 15, tzinfo=UTC)  # a Tuesday

GUARDRAILS = "# Ground rules\n\nBe honest and brief."
IDENTITY = "# Identity\n\nYou are Quill, a helpful assistant for the platform team."
SKILLS = (
    Skill("summarize", "Summarize a discussion into decisions and next steps.", "List decisions."),
    Skill("research", "Look things up carefully and cite sources.", "Search, then cite."),
    Skill("standup", "Write the daily standup note.", "Yesterday, today, blockers."),
)


def make_agent(
    selected: tuple[str, ...] = ("standup",), skills: tuple[Skill, ...] = SKILLS
) -> AgentTexts:
    return AgentTexts(GUARDRAILS, IDENTITY, skills, selected)


def make_assembler(
    counter: TokenCounter,
    *,
    agent: AgentTexts | None = None,
    context_window: int = 200_000,
    max_tokens: int = 4096,
    memory_enabled: bool = True,
    skill_max_bytes: int = 48_000,
    tools: tuple[ToolSpec, ...] = (),
    session_template: Template = DEFAULT_SESSION_TEMPLATE,
) -> Assembler:
    return Assembler(
        agent or make_agent(),
        ModelLimits("claude-sonnet-4-5", max_tokens, context_window),
        timezone="Europe/Berlin",
        counter=counter,
        tools=tools,
        memory_enabled=memory_enabled,
        skill_max_bytes=skill_max_bytes,
        templates=Templates(session=session_template),
    )


MEMORY_TOOL = ToolSpec(
    "memory_recall",
    "Search long-term memory.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)


def slack_request(
    text: str = "Ship it then.",
    *,
    key: str = "slack:T1:C0A1B2C3D:1742203000.000100",
    at: datetime = CLOCK,
    speaker: Speaker | None = None,
    preceding: tuple[PrecedingMessage, ...] = (),
    surface: Surface | None = None,
) -> TurnRequest:
    return TurnRequest(
        conversation_key=key,
        kind=ConversationKind.PUSH,
        channel="slack",
        text=text,
        received_at=at,
        turn_id="turn-1",
        speaker=speaker or Speaker("Alice Chen", "alice"),
        surface=surface
        or Surface(SurfaceKind.CHANNEL, "C0A1B2C3D", "team-platform", True, 3800, "Slack", True),
        preceding=preceding,
        route=ReplyRoute("slack", {"channel": "C0A1B2C3D", "thread_ts": "1742203000.000100"}),
        person="slack:T1:U0ALICE",
    )


def console_request(text: str = "hello", *, key: str = "console:5b0c") -> TurnRequest:
    return TurnRequest(key, ConversationKind.CONSOLE, "console", text, CLOCK, "turn-c")


def cron_request(text: str = "Write the standup note.", *, notifies: bool = True) -> TurnRequest:
    return TurnRequest(
        "cron:weekday-standup",
        ConversationKind.REQUEST,
        "cron",
        text,
        CLOCK,
        "turn-r",
        route=ReplyRoute("slack", {"channel": "C0STANDUP"}) if notifies else None,
        notifies=notifies,
    )


def chatter(
    count: int, *, start: datetime = CLOCK - timedelta(minutes=30)
) -> tuple[PrecedingMessage, ...]:
    return tuple(
        PrecedingMessage(start + timedelta(seconds=20 * i), f"Person {i}", f"message {i}", f"p{i}")
        for i in range(count)
    )


def hits(count: int = 2) -> list[MemoryHit]:
    return [
        MemoryHit(
            f"m{i}",
            f"Fact number {i} about the release.",
            "slack:C0A1B2C3D",
            1.0 - i / 10,
            CLOCK - timedelta(days=i + 1),
        )
        for i in range(count)
    ]


def exchange(
    question: str,
    answer: str,
    *,
    speaker: str | None = "Bob",
    at: datetime | None = None,
    tokens: int = 0,
) -> list[HistoryEntry]:
    return [
        HistoryEntry("user", (TextBlock(question),), speaker=speaker, tokens=tokens, at=at),
        HistoryEntry("assistant", (TextBlock(answer),), tokens=tokens, at=at),
    ]


def tool_round(call_id: str = "toolu_1", *, tokens: int = 0) -> list[HistoryEntry]:
    return [
        HistoryEntry(
            "assistant",
            (ToolUseBlock(call_id, "memory_recall", {"query": "release"}),),
            tokens=tokens,
        ),
        HistoryEntry("user", (ToolResultBlock(call_id, "release is on Friday"),), tokens=tokens),
    ]
