"""Long-term memory through Telegram end to end: the whole App, PTB polling the fake Bot API.

A fact told in a DM comes back in that person's DM (once it is no longer in the replayed history)
and never in a group, not even when the teller asks there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.cli.compose import App
from bot.ports.memory import MemoryScope
from tests.channels.recalled import recalled
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_001
BOB_ID = 987_654_321_002
GROUP_ID = -1_002_233_445_001


Chat = dict[str, Any]


def people(tg: FakeTelegram) -> tuple[Chat, Chat, Chat, Chat]:
    """Alice and Bob, Alice's DM with the bot, and a group they are both in."""
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    bob = tg.user("Bob", "Stone", "bob", user_id=BOB_ID)
    return alice, bob, tg.private_chat(alice), tg.supergroup(GROUP_ID, "Platform team")


async def test_a_dm_fact_comes_back_in_that_dm_and_never_in_a_group(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice, bob, dm, group = people(tg)
    async with App(make_config()) as app:
        await tg.push(tg.message(dm, alice, "my locker combination is 31-7-44"))
        await tg.wait_sent(1)
        await app.host.idle()
        # Alice speaks in the group too (so the group is a surface she took part in), and both
        # ask about the combination there.
        await tg.push(tg.message(group, alice, "where is my locker combination?", mention=True))
        await tg.wait_sent(2)
        await tg.push(tg.message(group, bob, "what is alice's locker combination?", mention=True))
        await tg.wait_sent(3)
        await app.host.idle()
        # Her DM still holds the fact in its history: recall does not repeat it there...
        await tg.push(tg.message(dm, alice, "what is my locker combination again?"))
        await tg.wait_sent(4)
        # ...and once the history no longer holds it, recall brings it back in her DM.
        await app.store.history.reset(f"telegram:{ALICE_ID}")
        await tg.push(tg.message(dm, alice, "what is my locker combination again?"))
        await tg.wait_sent(5)
        await app.host.idle()
    requests = claude.requests
    assert "31-7-44" not in json.dumps(requests[1]) + json.dumps(requests[2])
    assert "31-7-44" not in recalled(requests[3])
    assert "31-7-44" in json.dumps(requests[3]["messages"][0])  # in the replayed history
    assert "31-7-44" in recalled(requests[4])


async def test_leaving_the_group_ends_dm_recall_of_what_others_said_there(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice, bob, dm, group = people(tg)
    async with App(make_config()) as app:
        await tg.push(tg.message(group, alice, "morning all", mention=True))
        await tg.push(tg.message(group, bob, "the freezer alarm code is 5150", mention=True))
        await tg.wait_sent(2)
        await app.host.idle()
        await tg.push(tg.message(dm, alice, "what is the freezer alarm code?"))
        await tg.wait_sent(3)
        left = tg.message(group, alice, "")
        left["message"].pop("text")
        left["message"]["left_chat_member"] = dict(alice)
        await tg.push(left)
        await tg.push(tg.message(dm, alice, "the freezer alarm code, please"))
        await tg.wait_sent(4)
        await app.host.idle()
    assert "5150" in recalled(claude.requests[2])
    assert "5150" not in recalled(claude.requests[3])


async def test_memory_and_forget_in_a_dm_and_a_group_never_reach_the_model(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice, bob, dm, group = people(tg)
    async with App(make_config()) as app:
        await tg.push(tg.message(group, alice, "the standup moved to 9:15", mention=True))
        await tg.push(tg.message(group, bob, "my desk is B12", mention=True))
        await tg.push(tg.message(dm, alice, "I prefer tea"))
        await tg.wait_sent(3)
        await app.host.idle()
        calls = len(claude.requests)
        await tg.push(tg.message(group, alice, "", command="memory"))
        await tg.push(tg.message(dm, alice, "/memory"))
        await tg.push(tg.message(group, alice, "all", command="forget"))
        await tg.push(tg.message(dm, alice, "/forget 1"))
        await tg.push(tg.message(dm, alice, "/memory"))
        replies = [sent.plain for sent in await tg.wait_sent(8)]
        bobs = await app.store.memory.own(f"telegram:{BOB_ID}", _group_scope(), 10)
    assert tg.commands[-2:] == [
        {"command": "memory", "description": "What I remember you said here"},
        {"command": "forget", "description": "Forget what you said: /forget N, or /forget all"},
    ]
    assert len(claude.requests) == calls, "the commands never reach the model"
    in_group, in_dm, forgot_group, forgot_one, after = replies[3:]
    assert "standup" in in_group
    assert "tea" not in in_group
    assert "B12" not in in_group
    assert "1. (" in in_dm
    assert "tea" in in_dm
    assert "standup" in in_dm
    assert forgot_group.startswith("Done: I forgot all 1")
    assert "tea" in forgot_one
    assert after.startswith("I don't remember anything")
    assert [entry.said for entry in bobs[0]] == ["my desk is B12"], "Bob's entry is untouched"


def _group_scope() -> MemoryScope:
    return MemoryScope(f"telegram:{GROUP_ID}", person=f"telegram:{BOB_ID}")


async def test_usage_is_told_in_a_private_chat_and_in_a_group_only_to_the_person_who_asked(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice, _, dm, group = people(tg)
    async with App(make_config()) as app:
        await tg.push(tg.message(dm, alice, "hello"))
        await tg.wait_sent(1)
        await app.host.idle()
        calls = len(claude.requests)
        await tg.push(tg.message(dm, alice, "/usage"))
        await tg.push(tg.message(group, alice, "", command="usage"))
        sent = await tg.wait_sent(3)
    assert len(claude.requests) == calls, "/usage never reaches the model"
    # Two chats, two lanes: the replies may come in either order.
    (in_dm,) = [reply for reply in sent[1:] if reply.chat_id == dm["id"]]
    (in_group,) = [reply for reply in sent[1:] if reply.chat_id == GROUP_ID]
    assert in_dm.plain.startswith("Today you have used")
    assert "used 0 tokens" not in in_dm.plain
    # In the group: a message only Alice sees (Bot API 10.2), with the same report.
    assert (in_group.chat_id, in_group.receiver) == (GROUP_ID, alice["id"])
    assert in_group.plain == in_dm.plain
