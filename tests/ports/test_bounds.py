"""History bounds: per-message size, and pruning by idle days, conversation count and bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.ports.stores import OpenStore
from bot.store.sql.codec import bound_entry, decode_entry, encode_entry, shorten
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock
from tests.engines import Clock, Engine
from tests.store.sqlite.helpers import assistant, turn, user

pytestmark = pytest.mark.all_engines

DAY = 86_400.0

blocks = st.one_of(
    st.builds(TextBlock, st.text(max_size=3000)),
    st.builds(ToolResultBlock, st.text(max_size=20), st.text(max_size=3000), st.booleans()),
    st.builds(
        ToolUseBlock,
        st.text(max_size=20),
        st.text(max_size=20),
        st.dictionaries(st.text(max_size=10), st.text(max_size=1500), max_size=3),
    ),
)
entries = st.builds(
    HistoryEntry,
    role=st.sampled_from(["user", "assistant"]),
    blocks=st.lists(blocks, min_size=1, max_size=4).map(tuple),
    speaker=st.none() | st.text(max_size=600),
    tokens=st.integers(0, 10_000),
    summary=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(entry=entries, limit=st.integers(1024, 9000))
def test_any_entry_is_bounded_and_still_readable(entry: HistoryEntry, limit: int) -> None:
    bounded = bound_entry(entry, limit)

    stored = encode_entry(bounded)
    assert len(stored.encode("utf-8")) <= limit
    assert decode_entry(stored) == bounded
    assert bounded.role == entry.role
    if len(encode_entry(entry).encode("utf-8")) <= limit:
        assert bounded == entry
    else:
        assert bounded.tokens <= entry.tokens


@given(text=st.text(max_size=5000), limit=st.integers(0, 6000))
def test_shorten_is_utf8_safe_and_bounded(text: str, limit: int) -> None:
    cut = shorten(text, limit)

    if len(text.encode("utf-8")) <= limit:
        assert cut == text
    else:
        assert len(cut.encode("utf-8")) <= limit


async def test_oversized_message_is_stored_shortened_keeping_head_and_tail(
    store: OpenStore,
) -> None:
    huge = "HEAD " + "x" * 200_000 + " TAIL"

    await store.history.publish("k", [user(huge, tokens=50_000), assistant("ok")])

    loaded = (await store.history.load("k"))[0]
    assert len(encode_entry(loaded).encode()) <= 64 * 1024
    assert loaded.text.startswith("HEAD ")
    assert loaded.text.endswith(" TAIL")
    assert loaded.tokens < 50_000


async def open_with(engine: Engine, **bounds: int) -> OpenStore:
    return await engine.open(**bounds)


async def test_idle_conversations_are_pruned_after_a_publish(engine: Engine, clock: Clock) -> None:
    store = await open_with(engine, idle_days=30)
    try:
        await store.history.publish("old", turn(1))
        clock.advance(20 * DAY)
        await store.history.publish("recent", turn(1))
        clock.advance(15 * DAY)  # "old" is now 35 days idle, "recent" 15
        assert await store.history.load("old") != []  # nothing is pruned until a publish

        await store.history.publish("new", turn(1))

        assert await store.history.conversations() == ["new", "recent"]
    finally:
        await store.aclose()


async def test_conversation_count_prunes_oldest_inactive_first(
    engine: Engine, clock: Clock
) -> None:
    store = await open_with(engine, max_conversations=3)
    try:
        for key in ("a", "b", "c"):
            await store.history.publish(key, turn(1))
            clock.advance(60)
        await store.history.publish("a", turn(2))  # "b" is now the oldest inactive
        clock.advance(60)

        await store.history.publish("d", turn(1))

        assert sorted(await store.history.conversations()) == ["a", "c", "d"]
    finally:
        await store.aclose()


async def test_total_bytes_prunes_oldest_inactive_first(engine: Engine, clock: Clock) -> None:
    store = await open_with(engine, max_bytes=1024 * 1024)
    big = [user("q " + "y" * 60_000), assistant("a " + "z" * 60_000)]  # ~120 KB a conversation
    try:
        for n in range(12):
            await store.history.publish(f"c{n}", big)
            clock.advance(60)

        kept = await store.history.describe()
        total = sum(info.bytes for info in kept)
        assert total <= 1024 * 1024
        assert {info.key for info in kept} == {f"c{n}" for n in range(12 - len(kept), 12)}
        assert len(kept) >= 7
    finally:
        await store.aclose()


async def test_the_just_published_conversation_is_never_pruned(
    engine: Engine, clock: Clock
) -> None:
    store = await open_with(engine, max_conversations=1)
    try:
        await store.history.publish("a", turn(1))
        await store.history.publish("b", turn(1))
        assert await store.history.conversations() == ["b"]
    finally:
        await store.aclose()


async def test_window_size_is_configurable(engine: Engine, clock: Clock) -> None:
    store = await open_with(engine, history_messages=8)
    try:
        for n in range(5):
            await store.history.publish("k", turn(n))
        loaded = await store.history.load("k")
        # Four messages a turn: turn 4 took the window to 12 > 8, so it dropped to the newest 4.
        assert len(loaded) == 4
        assert loaded[0].text == "question 4"
    finally:
        await store.aclose()
