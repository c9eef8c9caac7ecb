"""Tool results age (SPEC §5): older than the newest turns, a result is replayed as a short
reference, and `tool_result_fetch` reads it back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import ToolError
from bot.ports.request import ToolResult
from bot.prompt.ageing import FETCH_TOOL, ResultFetch, aged, has_aged, reference
from bot.prompt.history import render
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock


def turn(n: int, size: int = 2000) -> list[HistoryEntry]:
    return [
        HistoryEntry("user", (TextBlock(f"question {n}"),), speaker="Ann (@ann)"),
        HistoryEntry("assistant", (ToolUseBlock(f"t{n}", "notes__search", {"query": f"q{n}"}),)),
        HistoryEntry("user", (ToolResultBlock(f"t{n}", f"result {n} " + "x" * size),), tokens=600),
        HistoryEntry("assistant", (TextBlock(f"answer {n}"),)),
    ]


def conversation(turns: int) -> list[HistoryEntry]:
    return [entry for n in range(turns) for entry in turn(n)]


def results(entries: list[HistoryEntry]) -> list[ToolResultBlock]:
    return [b for e in entries for b in e.blocks if isinstance(b, ToolResultBlock)]


def test_results_older_than_the_newest_turns_become_references() -> None:
    history = aged(conversation(5), 3)
    old, kept = results(history)[:2], results(history)[2:]
    assert [bool(r.aged) for r in old + kept] == [True, True, False, False, False]
    assert old[0].aged == (
        '[An earlier result of notes__search {"query": "q0"} (2,009 bytes), not repeated here. '
        f'To read it again, call {FETCH_TOOL} with id "t0".]'
    )
    assert old[0].content.startswith("result 0 ")  # kept, to be fetched again
    assert history[2].tokens < 600  # its estimate shrinks with it
    assert has_aged(history)
    assert aged(history, 3) == history  # ageing again changes nothing
    replayed = render(history)
    [part] = replayed[2].parts
    assert isinstance(part, ToolResult)
    assert part.content == old[0].aged


def test_nothing_ages_with_few_turns_zero_or_short_results() -> None:
    assert aged(conversation(3), 3) == conversation(3)
    assert aged(conversation(5), 0) == conversation(5)
    short = [e for n in range(5) for e in turn(n, size=10)]
    assert not has_aged(aged(short, 1))


async def test_the_fetch_tool_reads_this_conversations_results_back() -> None:
    history = aged(conversation(5), 3)
    fetch = ResultFetch(history)
    assert (await fetch({"id": "t0"})).startswith("result 0 xxx")
    with pytest.raises(ToolError, match="no earlier tool result"):
        await fetch({"id": "elsewhere"})


@given(arguments=st.dictionaries(st.text(max_size=20), st.text(max_size=400), max_size=5))
def test_a_reference_is_one_bounded_line_whatever_the_arguments(
    arguments: dict[str, str],
) -> None:
    call = ToolUseBlock("t1", "notes__search", arguments)
    short = reference(call, ToolResultBlock("t1", "x" * 5000))
    assert "\n" not in short
    assert len(short) < 400
    assert "</tool_result" not in short.lower()
