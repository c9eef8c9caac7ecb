"""Pairing on Slack (SPEC §19, `[access] unknown = "pair"`): an unknown person's DM gets a
one-time code there and nothing reaches the model; once admitted, they are answered. The whole
App with slack-bolt on Socket Mode against the fake Slack."""

from __future__ import annotations

import re

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack

PAIR = f'allowed_user_ids = ["{ALICE}"]\n\n[access]\nunknown = "pair"\n'
CODE = re.compile(r"\b[A-Z2-9]{4}-[A-Z2-9]{4}\b")


async def test_an_unknown_person_in_a_dm_gets_a_code_and_once_admitted_is_answered(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    bobs_dm = "D0BOB0001"
    slack.add_channel(bobs_dm, kind="im")
    claude.script("Hello Bob.")
    async with App(make_config(PAIR)) as app:
        await send(slack, app, slack.dm(bobs_dm, BOB, "let me in"))
        await send(slack, app, slack.mention(GENERAL, BOB, "me too"))  # no code in a channel
        await slack.wait_for(lambda: len(slack.posts) == 1)
        [offer] = slack.posts
        [code] = set(CODE.findall(offer["text"]))
        admitted = await app.store.access.approve(code)
        await send(slack, app, slack.dm(bobs_dm, BOB, "now?"))
    assert offer["channel"] == bobs_dm
    assert admitted is not None
    assert admitted.person == f"slack:{TEAM}:{BOB}"
    assert len(claude.requests) == 1
    assert "let me in" not in str(claude.requests[0])
    assert "me too" not in str(claude.requests[0])
    assert [p["text"] for p in slack.posts[1:]] == ["Hello Bob."]
    assert DM not in {p["channel"] for p in slack.posts}
