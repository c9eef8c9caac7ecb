"""Replies meant for one member of a Telegram group (`/usage`, `/memory`, refusals): a message
only that member sees where the Bot API offers it (10.2's `receiver_user_id`), else their private
chat with the bot, else what may be said in the open. The whole App against the fake Bot API."""

from __future__ import annotations

import pytest

from bot import replies
from bot.cli.compose import App
from tests.channels.telegram.conftest import MakeConfig
from tests.channels.telegram.test_memory import BOB_ID, GROUP_ID, people
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


async def test_memory_in_a_group_is_shown_to_its_person_alone(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice, _, _, group = people(tg)
    async with App(make_config()) as app:
        await tg.push(tg.message(group, alice, "", command="memory"))
        [shown] = await tg.wait_sent(1)
        await app.host.idle()
    assert (shown.chat_id, shown.receiver) == (GROUP_ID, alice["id"])
    assert claude.requests == []


async def test_an_older_bot_api_shows_it_in_the_private_chat_and_takes_the_open_one_back(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    tg.private_messages = False  # the parameter is ignored: the message is everyone's
    alice, _, dm, group = people(tg)
    async with App(make_config()) as app:
        await tg.push(tg.message(group, alice, "", command="usage"))
        await tg.wait_for(lambda: len(tg.deleted) == 1 and len(tg.sent) == 1)
        await app.host.idle()
    [told] = tg.sent
    assert told.chat_id == dm["id"]
    assert told.plain.startswith("Today you have used")
    assert tg.deleted[0].chat_id == GROUP_ID  # shown in the group for a moment, then removed


async def test_without_either_the_group_hears_only_what_may_be_said_in_the_open(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    tg.private_messages = False
    _, bob, _, group = people(tg)  # Bob never opened a private chat with the bot
    async with App(make_config()) as app:
        await tg.push(tg.message(group, bob, "", command="usage"))
        await tg.wait_for(lambda: len(tg.deleted) == 1 and len(tg.sent) == 1)
        await app.host.idle()
    [said] = tg.sent
    assert (said.chat_id, said.receiver) == (GROUP_ID, None)
    assert said.plain == replies.USAGE_PRIVATE
    assert BOB_ID not in {s.chat_id for s in tg.sent}
