"""History: atomic publish, the per-conversation window, replace, reset, listing."""

from __future__ import annotations

import pytest

from bot.ports.stores import OpenStore
from bot.turns import ToolResultBlock
from tests.store.sqlite.helpers import assistant, tool_call, tool_result, turn, user

pytestmark = pytest.mark.all_engines


async def test_published_turn_loads_back_with_speaker_and_tokens(store: OpenStore) -> None:
    await store.history.publish(
        "slack:T1:C1:1.0", [user("hi", "Alice Chen (@alice)", 7), assistant("hello", 3)]
    )

    loaded = await store.history.load("slack:T1:C1:1.0")

    assert [e.text for e in loaded] == ["hi", "hello"]
    assert loaded[0].speaker == "Alice Chen (@alice)"
    assert [e.tokens for e in loaded] == [7, 3]


async def test_unknown_conversation_loads_empty(store: OpenStore) -> None:
    assert await store.history.load("console:nobody") == []


async def test_window_never_exceeds_64_and_drops_to_half_at_once(store: OpenStore) -> None:
    # Four messages a turn: 16 turns fill the 64-message window exactly.
    for n in range(16):
        await store.history.publish("k", turn(n))
    assert len(await store.history.load("k")) == 64

    await store.history.publish("k", turn(16))  # 68: over the bound, keep the newest 32
    loaded = await store.history.load("k")
    assert len(loaded) == 32
    assert loaded[0].text == "question 9"

    previous = loaded
    for n in range(17, 40):
        await store.history.publish("k", turn(n))
        loaded = await store.history.load("k")
        assert len(loaded) <= 64
        if len(loaded) > len(previous):
            # Below the bound the window only grows: its first message stays put, so the
            # provider's cached prefix of this history keeps matching.
            assert loaded[0] == previous[0]
        previous = loaded
    assert len(loaded) == 52
    assert loaded[0].text == "question 27"
    assert loaded[-1].text == "answer 39"


async def test_trim_that_would_orphan_a_tool_result_drops_it_too(store: OpenStore) -> None:
    # 63 plain messages then a turn: the 64-message cut falls inside the tool round.
    await store.history.publish("k", [user(f"m{i}") for i in range(61)])
    await store.history.publish("k", turn(1))
    await store.history.publish("k", [tool_call("c2", "q"), tool_result("c2", "r")])

    loaded = await store.history.load("k")

    first = loaded[0]
    assert first.role == "user"
    assert not any(isinstance(b, ToolResultBlock) for b in first.blocks)
    assert len(loaded) <= 64


async def test_replace_makes_entries_the_whole_history(store: OpenStore) -> None:
    await store.history.publish("k", turn(1) + turn(2))
    summary = user("summary of turns 1-2")

    await store.history.publish("k", [summary, *turn(3)], replace=True)

    assert [e.text for e in await store.history.load("k")][:2] == [
        "summary of turns 1-2",
        "question 3",
    ]
    assert len(await store.history.load("k")) == 5


async def test_reset_forgets_one_conversation(store: OpenStore) -> None:
    await store.history.publish("a", turn(1))
    await store.history.publish("b", turn(1))

    assert await store.history.reset("a") is True
    assert await store.history.reset("a") is False
    assert await store.history.load("a") == []
    assert len(await store.history.load("b")) == 4


async def test_conversations_lists_most_recently_active_first(store: OpenStore, clock) -> None:
    for key in ("a", "b", "c"):
        await store.history.publish(key, turn(1))
        clock.advance(10)
    await store.history.publish("a", turn(2))

    assert await store.history.conversations() == ["a", "c", "b"]
