"""The compaction summary survives the message bound (SPEC §5): history drops to its newest half
at once, and the summary stays first, once, on every engine; old tool results age then (and at a
compaction) and not in between."""

from __future__ import annotations

import pytest

from bot.model.compaction import summary_entry
from bot.turns import AttachmentBlock, HistoryEntry, ToolResultBlock
from tests.engines import Engine
from tests.store.sqlite.helpers import turn

pytestmark = pytest.mark.all_engines

FILE = AttachmentBlock(1, "plan.pdf", "pdf", "application/pdf", 2048, content_id="c1")


async def test_halving_keeps_the_summary_first_and_the_newest_half_after_it(
    engine: Engine,
) -> None:
    store = await engine.open(history_messages=8)
    try:
        await store.history.publish(
            "k", [summary_entry("S: ticket OPS-42 open", [FILE])], replace=True
        )
        for n in range(3):
            await store.history.publish("k", turn(n))
        loaded = await store.history.load("k")
        # 1 + 12 > 8: the newest half (4 messages: turn 2) after the summary.
        assert [e.summary for e in loaded] == [True, False, False, False, False]
        assert loaded[0].text == "S: ticket OPS-42 open"
        assert loaded[0].blocks[1:] == (FILE,)  # the files it names stay with it
        assert loaded[1].text == "question 2"
        for n in range(3, 6):
            await store.history.publish("k", turn(n))
        loaded = await store.history.load("k")
        assert [e.summary for e in loaded] == [True, False, False, False, False]
        assert [e.text for e in loaded[1:2]] == ["question 5"]
        await store.history.publish("k", turn(6)[:2])  # appended after the rewritten rows
        loaded = await store.history.load("k")
        assert [e.summary for e in loaded] == [True, False, False, False, False, False, False]
        assert [loaded[1].text, loaded[5].text] == ["question 5", "question 6"]
    finally:
        await store.aclose()


async def test_halving_without_a_summary_is_as_before(engine: Engine) -> None:
    store = await engine.open(history_messages=8)
    try:
        for n in range(3):
            await store.history.publish("k", turn(n))
        loaded = await store.history.load("k")
        assert not any(e.summary for e in loaded)
        assert [e.text for e in loaded[:1]] == ["question 2"]
    finally:
        await store.aclose()


def _results(entries: list[HistoryEntry]) -> list[ToolResultBlock]:
    return [b for e in entries for b in e.blocks if isinstance(b, ToolResultBlock)]


async def test_old_tool_results_age_only_when_history_is_halved(engine: Engine) -> None:
    store = await engine.open(history_messages=16, tool_results_turns=1)
    try:
        for n in range(4):
            await store.history.publish("k", turn(n, "x" * 2000))
        before = await store.history.load("k")
        assert not any(r.aged for r in _results(before))  # 16 messages: no halving yet
        await store.history.publish("k", turn(4, "x" * 2000))
        halved = await store.history.load("k")  # 20 > 16: the newest 8 (turns 3 and 4)
        assert [bool(r.aged) for r in _results(halved)] == [True, False]
        assert _results(halved)[0].content.endswith("x" * 100)  # kept to be fetched again
        await store.history.publish("k", turn(5, "x" * 2000))
        later = await store.history.load("k")
        assert later[: len(halved)] == halved  # byte-stable until the next halving
        assert [bool(r.aged) for r in _results(later)] == [True, False, False]
    finally:
        await store.aclose()


async def test_a_compaction_ages_the_tail_it_keeps(engine: Engine) -> None:
    store = await engine.open(tool_results_turns=1)
    try:
        tail = [*turn(1, "y" * 2000), *turn(2, "y" * 2000)]
        await store.history.publish("k", [summary_entry("S"), *tail], replace=True)
        loaded = await store.history.load("k")
        assert [bool(r.aged) for r in _results(loaded)] == [True, False]
    finally:
        await store.aclose()
