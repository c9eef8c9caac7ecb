"""The per-turn RecallCache and the memory_recall tool, over the real SQLite memory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from structlog.testing import capture_logs

from bot.errors import ToolError
from bot.memory.recall import (
    MEMORY_RECALL_SPEC,
    RECALL_PLACEHOLDER,
    RecallCache,
    request_holds,
    without_recalled_words,
)
from bot.ports.memory import MemoryCapture, MemoryHit, MemoryScope
from bot.ports.stores import OpenStore
from bot.prompt.message import memory_block
from bot.turns import (
    ConversationKind,
    HistoryEntry,
    PrecedingMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRequest,
)

pytestmark = pytest.mark.all_engines

SCOPE = MemoryScope("slack:C1", person="slack:T1:U1")
AT = datetime(2025, 3, 1, tzinfo=UTC)


def render(hits: Sequence[MemoryHit]) -> str:
    return memory_block(hits, UTC)


FACT = "the release train leaves every second Thursday"


async def remember(store: OpenStore, text: str = FACT) -> None:
    await store.memory.capture(
        MemoryCapture(
            conversation_key="slack:T1:C1:1.0",
            surface="slack:C1",
            person="slack:T1:U1",
            speaker_label="Alice (@alice)",
            user_text=text,
            answer="Noted.",
            at=datetime(2025, 3, 1, tzinfo=UTC),
        )
    )


async def test_tool_shares_the_turns_cache_with_automatic_recall(store: OpenStore) -> None:
    await remember(store)
    cache = RecallCache(store.memory, SCOPE, render=render)
    automatic = await cache.recall("when does the release train leave")
    # Forgotten after the automatic lookup: the tool, asking the same, must answer from cache.
    assert await store.memory.forget(automatic[0].id)

    answer = await cache.tool()({"query": "when does the release train leave"})

    assert "second Thursday" in answer
    assert answer == render(automatic), "the tool answers with the automatic block, fenced"


async def test_memory_recalled_logs_source_and_size_never_content(store: OpenStore) -> None:
    await remember(store)
    cache = RecallCache(store.memory, SCOPE, render=render)

    with capture_logs() as logs:
        hits = await cache.recall("release train")
        await cache.tool()({"query": "release train"})

    events = [e for e in logs if e["event"] == "memory_recalled"]
    assert [e["source"] for e in events] == ["auto", "tool"]
    assert events[0]["bytes"] == len(hits[0].text.encode())
    assert events[1]["cached"] is True
    assert not any("Thursday" in str(value) for e in events for value in e.values())


async def test_no_hits_and_no_memory(store: OpenStore) -> None:
    assert await RecallCache(store.memory, SCOPE, render=render).tool()({"query": "zebra"}) == (
        "No remembered exchange matches that query."
    )
    assert await RecallCache(None, SCOPE, render=render).recall("anything") == []


async def test_tool_rejects_a_missing_query(store: OpenStore) -> None:
    with pytest.raises(ToolError, match="query"):
        await RecallCache(store.memory, SCOPE, render=render).tool()({"q": "x"})


async def test_a_closed_store_fails_the_tool_call_not_automatic_recall(store: OpenStore) -> None:
    await remember(store)
    cache = RecallCache(store.memory, SCOPE, render=render)
    await store.aclose()

    assert await cache.recall("release train") == []
    with pytest.raises(ToolError, match="unavailable"):
        await cache.tool()({"query": "release train"})


def test_spec_is_the_read_only_recall_tool() -> None:
    assert MEMORY_RECALL_SPEC.name == "memory_recall"
    assert MEMORY_RECALL_SPEC.input_schema["required"] == ["query"]


def test_recall_tool_results_become_the_placeholder() -> None:
    entries = [
        HistoryEntry("assistant", (TextBlock("Looking."), ToolUseBlock("t1", "memory_recall", {}))),
        HistoryEntry("user", (ToolResultBlock("t1", "<recalled_memory>secret</recalled_memory>"),)),
        HistoryEntry("assistant", (ToolUseBlock("t2", "load_skill", {"name": "x"}),)),
        HistoryEntry("user", (ToolResultBlock("t2", "skill body"),)),
        HistoryEntry("assistant", (ToolUseBlock("t3", "memory_recall", {}),)),
        HistoryEntry("user", (ToolResultBlock("t3", "memory is unavailable", is_error=True),)),
    ]

    kept = without_recalled_words(entries)

    results = [b for e in kept for b in e.blocks if isinstance(b, ToolResultBlock)]
    assert [b.content for b in results] == [
        RECALL_PLACEHOLDER,
        "skill body",
        "memory is unavailable",
    ]
    assert kept[0] is entries[0]
    assert kept[3] is entries[3]


def test_request_holds_name_the_history_window_and_the_fence() -> None:
    request = TurnRequest(
        "slack:T1:C1:1.0",
        ConversationKind.PUSH,
        "slack",
        "hi",
        AT,
        "t",
        preceding=(PrecedingMessage(AT, "Ann", "the code is 12"),),
    )
    summary = HistoryEntry("user", (TextBlock("summary"),), summary=True, at=AT)
    later = HistoryEntry("user", (TextBlock("x"),), at=AT + timedelta(hours=1))

    holds = request_holds(request, [summary, later])

    assert holds.conversation_key == "slack:T1:C1:1.0"
    assert holds.history_since == AT + timedelta(hours=1)
    assert holds.preceding == ("the code is 12",)
    assert request_holds(request, []).history_since is None
