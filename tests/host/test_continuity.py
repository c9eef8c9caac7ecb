"""Continuity accounts (SPEC §5): every call listed with its outcome, 48 KiB in all, whatever
the sizes of the request, the arguments, the results and the partial text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.host.continuity import CONTINUITY_MAX_BYTES, ToolsRan, continuity_account
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

texts = st.text(max_size=300).map(lambda t: t * 200)  # up to ~60,000 characters


def _size(entries: list[HistoryEntry]) -> int:
    return sum(len(entry.text.encode()) for entry in entries)


@settings(max_examples=40, deadline=None)
@given(
    request=texts,
    partial=texts,
    calls=st.lists(st.tuples(st.text(min_size=1, max_size=40), texts, texts), max_size=30),
)
def test_an_account_names_every_call_and_stays_within_its_bound(
    request: str, partial: str, calls: list[tuple[str, str, str]]
) -> None:
    ran = ToolsRan()
    for index, (name, argument, result) in enumerate(calls):
        ran.note(ToolUseBlock(f"t{index}", name, {"a": argument}))
        ran.note(ToolResultBlock(f"t{index}", result))
    user = HistoryEntry("user", (TextBlock(request),), speaker="Ann")
    account = continuity_account(user, partial, "the model did not answer in time", ran)
    assert _size(account) <= CONTINUITY_MAX_BYTES
    note = account[1].text
    assert note.startswith("[The host: this turn did not complete")
    for index, (name, _, _) in enumerate(calls, 1):
        assert f"\n{index}. {name} " in note  # the calls themselves, always


def test_a_small_account_keeps_everything_as_it_was() -> None:
    ran = ToolsRan()
    ran.note(ToolUseBlock("t1", "tickets__create", {"title": "printer"}))
    ran.note(ToolResultBlock("t1", "created\nTICKET-7", is_error=False))
    ran.note(ToolUseBlock("t2", "tickets__close", {"id": 7}))
    ran.note(ToolResultBlock("t2", "no such ticket", is_error=True))
    user = HistoryEntry("user", (TextBlock("open one"),), speaker="Ann")
    [kept, note] = continuity_account(user, "Opening", "the person stopped it", ran)
    assert kept == user
    assert note.text.splitlines() == [
        "[The host: this turn did not complete (the person stopped it). The person got no full "
        "answer.]",
        "[Tool calls that ran in this turn, in order. Each one took effect as its outcome says; "
        "do not run one again unless the person asks for it again.]",
        '1. tickets__create {"title": "printer"} -> ok: created TICKET-7',
        '2. tickets__close {"id": 7} -> failed: no such ticket',
        "[Partial answer before it stopped:]",
        "Opening",
    ]
