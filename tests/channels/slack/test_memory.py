"""Long-term memory through Slack end to end: a member leaving a channel ends their DM's recall
of what others said there (the member_left_channel event, through bolt on Socket Mode)."""

from __future__ import annotations

from bot.cli.compose import App
from bot.ports.memory import MemoryScope
from tests.channels.recalled import recalled
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack


async def test_leaving_a_channel_ends_dm_recall_of_what_others_said_there(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config()) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "morning all"))
        await send(slack, app, slack.mention(GENERAL, BOB, "the freezer alarm code is 5150"))
        await send(slack, app, slack.dm(DM, ALICE, "what is the freezer alarm code?"))
        await send(slack, app, slack.member_left(GENERAL, ALICE))
        await send(slack, app, slack.dm(DM, ALICE, "the freezer alarm code, please"))
    assert "5150" in recalled(claude.requests[2])
    assert "5150" not in recalled(claude.requests[3])


async def test_memory_and_forget_by_mention_and_in_a_dm(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config()) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "the standup moved to 9:15"))
        await send(slack, app, slack.mention(GENERAL, BOB, "my desk is B12"))
        calls = len(claude.requests)
        await send(slack, app, slack.mention(GENERAL, ALICE, "/memory"))
        await send(slack, app, slack.dm(DM, ALICE, "/forget all"))
        await send(slack, app, slack.dm(DM, ALICE, "/memory"))
        bobs = await app.store.memory.own(f"slack:{TEAM}:{BOB}", MemoryScope(f"slack:{GENERAL}"), 5)
    assert len(claude.requests) == calls, "the commands never reach the model"
    listing, forgot, after = (post["text"] for post in slack.posts[2:])
    assert "standup" in listing
    assert "B12" not in listing
    assert forgot.startswith("Done: I forgot all 1")
    assert after.startswith("I don")
    assert [entry.said for entry in bobs[0]] == ["my desk is B12"], "Bob's entry is untouched"
