"""The per-turn RecallCache and the memory_recall tool, over the real SQLite memory."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from structlog.testing import capture_logs

from bot.ports import MemoryCapture, MemoryScope, ToolError
from bot.recall import MEMORY_RECALL_SPEC, RecallCache
from bot.stores import OpenStore

pytestmark = pytest.mark.both_engines

SCOPE = MemoryScope("slack:C1", person="slack:T1:U1")
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
    cache = RecallCache(store.memory, SCOPE)
    automatic = await cache.recall("when does the release train leave")
    # Forgotten after the automatic lookup: the tool, asking the same, must answer from cache.
    assert await store.memory.forget(automatic[0].id)

    answer = await cache.tool()({"query": "when does the release train leave"})

    assert "second Thursday" in answer
    assert "[2025-03-01]" in answer


async def test_memory_recalled_logs_source_and_size_never_content(store: OpenStore) -> None:
    await remember(store)
    cache = RecallCache(store.memory, SCOPE)

    with capture_logs() as logs:
        hits = await cache.recall("release train")
        await cache.tool()({"query": "release train"})

    events = [e for e in logs if e["event"] == "memory_recalled"]
    assert [e["source"] for e in events] == ["auto", "tool"]
    assert events[0]["bytes"] == len(hits[0].text.encode())
    assert events[1]["cached"] is True
    assert not any("Thursday" in str(value) for e in events for value in e.values())


async def test_no_hits_and_no_memory(store: OpenStore) -> None:
    assert await RecallCache(store.memory, SCOPE).tool()({"query": "zebra"}) == (
        "No remembered exchange matches that query."
    )
    assert await RecallCache(None, SCOPE).recall("anything") == []


async def test_tool_rejects_a_missing_query(store: OpenStore) -> None:
    with pytest.raises(ToolError, match="query"):
        await RecallCache(store.memory, SCOPE).tool()({"q": "x"})


async def test_a_closed_store_fails_the_tool_call_not_automatic_recall(store: OpenStore) -> None:
    await remember(store)
    cache = RecallCache(store.memory, SCOPE)
    await store.aclose()

    assert await cache.recall("release train") == []
    with pytest.raises(ToolError, match="unavailable"):
        await cache.tool()({"query": "release train"})


def test_spec_is_the_read_only_recall_tool() -> None:
    assert MEMORY_RECALL_SPEC.name == "memory_recall"
    assert MEMORY_RECALL_SPEC.input_schema["required"] == ["query"]
