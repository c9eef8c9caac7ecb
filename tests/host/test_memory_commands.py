"""/memory and /forget over the real SQLite memory: the speaker's own entries only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot import replies
from bot.host.memory_commands import answer, is_memory_command
from bot.ports.memory import MemoryCapture, MemoryScope
from bot.ports.stores import OpenStore

pytestmark = pytest.mark.all_engines

ANN, BEN = "slack:T1:U_ANN", "slack:T1:U_BEN"
CHANNEL, ANN_DM = "slack:C1", "slack:D_ANN"
AT = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
IN_DM = MemoryScope(ANN_DM, person=ANN, private=True)
IN_CHANNEL = MemoryScope(CHANNEL, person=ANN)


async def tell(store: OpenStore, person: str, surface: str, text: str, minutes: int) -> None:
    await store.memory.capture(
        MemoryCapture(f"{surface}:1", surface, person, person, text, "Noted.", _at(minutes))
    )


def _at(minutes: int) -> datetime:
    return AT + timedelta(minutes=minutes)


async def told(store: OpenStore) -> None:
    await tell(store, ANN, CHANNEL, "the deploy window is Tuesday", 0)
    await tell(store, BEN, CHANNEL, "my badge is 7731", 1)
    await tell(store, ANN, ANN_DM, "I prefer tea", 2)


def test_commands_are_recognised_as_words() -> None:
    assert is_memory_command("/memory")
    assert is_memory_command("  /Forget 2")
    assert not is_memory_command("/memorystuff")
    assert not is_memory_command("what is /memory for?")
    assert not is_memory_command("")


async def test_memory_lists_the_speakers_own_entries_in_scope(store: OpenStore) -> None:
    await told(store)

    in_dm = await answer("/memory", ANN, IN_DM, store.memory)
    in_channel = await answer("/memory", ANN, IN_CHANNEL, store.memory)

    assert in_dm.splitlines()[:3] == [
        replies.MEMORY_LIST.format(total=2),
        "1. (2025-03-01, yours, unverified) I prefer tea",
        "2. (2025-03-01, yours, unverified) the deploy window is Tuesday",
    ]
    assert "7731" not in in_dm
    assert "7731" not in in_channel
    assert "I prefer tea" not in in_channel, "a DM entry is not listed in a channel"


async def test_forget_n_deletes_that_entry_and_nobody_elses(store: OpenStore) -> None:
    await told(store)

    reply = await answer("/forget 1", ANN, IN_DM, store.memory)

    assert reply == replies.FORGOT_ONE.format(number=1, said="I prefer tea")
    assert "tea" not in await answer("/memory", ANN, IN_DM, store.memory)
    bens = await answer("/memory", BEN, MemoryScope(CHANNEL, person=BEN), store.memory)
    assert "7731" in bens


async def test_forget_all_deletes_every_own_entry_in_scope(store: OpenStore) -> None:
    await told(store)

    assert await answer("/forget all", ANN, IN_CHANNEL, store.memory) == replies.FORGOT_ALL.format(
        count=1
    )
    assert "tea" in await answer("/memory", ANN, IN_DM, store.memory)
    assert await answer("/forget ALL", ANN, IN_DM, store.memory) == replies.FORGOT_ALL.format(
        count=1
    )
    assert await answer("/memory", ANN, IN_DM, store.memory) == replies.MEMORY_EMPTY
    assert await answer("/forget all", ANN, IN_DM, store.memory) == replies.FORGOT_NOTHING
    assert await store.memory.count() == 1  # Ben's


async def test_bad_forget_arguments_get_a_clear_line_and_change_nothing(store: OpenStore) -> None:
    await told(store)
    for text in ("/forget", "/forget two", "/forget 0", "/forget -1", "/forget ²", "/forget 1 2"):
        assert await answer(text, ANN, IN_DM, store.memory) == replies.FORGET_USAGE, text
    assert await answer("/forget 9", ANN, IN_DM, store.memory) == replies.FORGET_NO_SUCH.format(
        number=9, total=2
    )
    assert await store.memory.count() == 3


async def test_a_long_list_is_short(store: OpenStore) -> None:
    for n in range(14):
        await tell(store, ANN, ANN_DM, f"fact number {n} " + "word " * 40, n)

    reply = await answer("/memory", ANN, IN_DM, store.memory)

    lines = reply.splitlines()
    assert len(lines) == 1 + 10 + 1 + 1
    assert lines[-2] == replies.MEMORY_MORE.format(count=4)
    assert all(len(line) < 120 for line in lines)
    # Entry 12 is beyond the list but still numbered the same way.
    assert "fact number 2 " in await answer("/forget 12", ANN, IN_DM, store.memory)


async def test_without_memory_or_a_person_nothing_happens() -> None:
    assert await answer("/memory", ANN, IN_DM, None) == replies.MEMORY_OFF
    console = MemoryScope("console:x", surfaceless=True)
    assert await answer("/forget all", None, console, None) == replies.MEMORY_OFF
