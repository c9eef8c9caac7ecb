"""A Telegram group with a daily budget, end to end through python-telegram-bot and the fakes:
once the budget is spent, the group gets one notice with the reset time and no model call, then
silence (not a notice per message), also after a restart; a DM elsewhere is still answered."""

from __future__ import annotations

import pytest

from bot.cli.compose import App
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

GROUP_ID = -1_004_455_667_788
ALICE_ID = 55_501
BUDGET = """
[[surfaces]]
platform = "telegram"
kind = "group"
budget = { daily_tokens = 50 }
"""


async def test_a_spent_group_budget_gives_one_notice_and_no_model_calls(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Night shift")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    config = make_config(BUDGET)
    async with App(config) as app:
        await tg.push(tg.message(group, alice, "first question", mention=True))
        await tg.wait_sent(1)  # the budget is not spent before this turn
        await tg.push(tg.message(group, alice, "second question", mention=True))
        await tg.wait_sent(2)
        await tg.push(tg.message(group, alice, "third question", mention=True))
        await tg.push(tg.message(tg.private_chat(alice), alice, "hello in private"))
        await tg.wait_sent(3)
        await app.host.idle()
    answer, notice, private = tg.sent
    assert len(claude.requests) == 2  # the first group turn and the DM
    assert answer.chat_id == notice.chat_id == GROUP_ID
    assert "budget" in notice.plain
    assert "resets at" in notice.plain
    assert private.chat_id == ALICE_ID

    async with App(config) as app:  # a restart: the spend and the notice are remembered
        await tg.push(tg.message(group, alice, "fourth question", mention=True))
        await tg.push(tg.message(tg.private_chat(alice), alice, "still there?"))
        await tg.wait_sent(4)
        await app.host.idle()
        outcomes = [record.outcome for record in await app.store.records.recent()]
    assert len(claude.requests) == 3
    assert [s.chat_id for s in tg.sent].count(GROUP_ID) == 2
    assert outcomes.count("over_budget") == 3  # second, third and fourth question


async def test_channel_posts_count_against_the_channel_for_per_person_limits(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    """A channel post has no person; it counts against its channel, so six posts with
    `person_daily_tokens = 1` make one model call, not six."""
    channel = tg.channel(-1_009_988_112_233, "Announcements")
    config = make_config("\n[budget]\nperson_daily_tokens = 1\n")
    async with App(config) as app:
        await tg.push(tg.channel_post(channel, "first post", "Dana"))
        await tg.wait_sent(1)
        for n in range(5):
            await tg.push(tg.channel_post(channel, f"post {n + 2}", "Dana"))
        await tg.wait_for(lambda: not tg.pending_updates)
        await app.host.idle()
        outcomes = [record.outcome for record in await app.store.records.recent()]
    assert len(claude.requests) == 1
    assert outcomes.count("over_budget") == 5
