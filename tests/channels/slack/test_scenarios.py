"""Slack end to end: the whole App (store, host, model runtime, HTTP port, Slack channel) with
slack-bolt talking to the fake Slack and the model behind the fake Anthropic API.

"Nothing happened" is never awaited as silence: each event is followed until the channel has
taken it in (acknowledged, then drained) and the host is idle, and only then are things counted.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp

from bot.cli.compose import App
from channels.slack.channel import EVENTS_PATH, SlackChannel
from channels.slack.split import MESSAGE_BUDGET, is_fence
from tests.channels.slack.conftest import (
    ALICE,
    BOB,
    DM,
    GENERAL,
    SIGNING_SECRET,
    MakeConfig,
)
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import BOT_USER, TEAM, FakeSlack


def slack_channel(app: App) -> SlackChannel:
    [channel] = [c for c in app.channels if isinstance(c, SlackChannel)]
    return channel


async def settle(slack: FakeSlack, app: App, envelope: str) -> None:
    """Wait until an event is acknowledged, taken in by the channel, and its turn is over."""
    await slack.acked(envelope)
    await slack_channel(app).drain()
    await app.host.idle()


async def send(slack: FakeSlack, app: App, body: dict[str, Any]) -> None:
    await settle(slack, app, await slack.push(body))


def sent_to_model(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def fences(text: str) -> int:
    return sum(1 for line in text.split("\n") if is_fence(line))


async def test_a_channel_mention_gets_one_threaded_answer(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("**Ship it** & relax")
    async with App(make_config()) as app:
        body = slack.mention(GENERAL, ALICE, "can we ship today?")
        await send(slack, app, body)
        ts = body["event"]["ts"]
        history = await app.store.history.load(f"slack:{TEAM}:{GENERAL}:{ts}")
        await slack.wait_for(lambda: len(slack.reactions) == 2)
    [post] = slack.posts
    assert (post["channel"], post["thread_ts"], post["text"]) == (
        GENERAL,
        ts,
        "*Ship it* &amp; relax",
    )
    assert [entry.text for entry in history] == ["can we ship today?", "**Ship it** & relax"]
    assert [(action, stamp) for action, _, stamp, _ in slack.reactions] == [
        ("add", ts),
        ("remove", ts),
    ]
    # The progress sign stays up until the answer is posted.
    methods = [call.method for call in slack.calls if call.method.startswith(("chat.", "reac"))]
    assert methods == ["reactions.add", "chat.postMessage", "reactions.remove"]


async def test_a_dm_is_answered_without_a_mention_at_top_level(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("hi Alice", "still here")
    async with App(make_config()) as app:
        await send(slack, app, slack.dm(DM, ALICE, "hello"))
        await send(slack, app, slack.dm(DM, ALICE, "are you there?"))
        keys = await app.store.history.conversations()
    assert [(post["channel"], post["thread_ts"], post["text"]) for post in slack.posts] == [
        (DM, None, "hi Alice"),
        (DM, None, "still here"),
    ]
    assert keys == [f"slack:{TEAM}:{DM}"]  # one conversation per DM
    assert "hello" in sent_to_model(claude.requests[1])  # the second turn saw the first


async def test_a_channel_follow_up_without_a_mention_gets_nothing(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("first answer", "second answer")
    async with App(make_config()) as app:
        first = slack.mention(GENERAL, ALICE, "question one")
        await send(slack, app, first)
        thread = first["event"]["ts"]
        await send(slack, app, slack.channel_message(GENERAL, ALICE, "thanks!", thread_ts=thread))
        await send(slack, app, slack.mention(GENERAL, BOB, "question two", thread_ts=thread))
    assert len(claude.requests) == 2
    assert [post["text"] for post in slack.posts] == ["first answer", "second answer"]
    # the un-mentioned follow-up is context for the next mention, not a turn of its own
    assert "thanks!" in sent_to_model(claude.requests[1]["messages"][-1])


async def test_the_same_event_delivered_twice_gets_one_answer(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config()) as app:
        body = slack.mention(GENERAL, ALICE, "only once")
        await send(slack, app, body)
        await settle(slack, app, await slack.push(body, retry_attempt=1))
        slack.ack_deadline = 0.0  # and once more as a "slow ack" retry
        await send(slack, app, slack.dm(DM, ALICE, "and here"))
        await slack.wait_for(lambda: len(slack.acks) == 4)
        await settle(slack, app, slack.envelopes[-1].envelope_id)
    assert len(claude.requests) == 2
    assert len(slack.posts) == 2


async def test_a_429_on_the_second_part_waits_then_posts_every_part_in_order(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    paragraphs = [f"Part {i}: " + "lorem ipsum " * 140 for i in range(8)]
    claude.script("\n\n".join(paragraphs))
    slack.fail("chat.postMessage", status=429, retry_after=1, after=1)
    async with App(make_config()) as app:
        body = slack.mention(GENERAL, ALICE, "tell me everything")
        await send(slack, app, body)
    posts = [call for call in slack.calls if call.method == "chat.postMessage"]
    assert [call.status for call in posts][:3] == [200, 429, 200]
    assert posts[2].at - posts[1].at >= 1.0  # Retry-After honoured
    texts = [post["text"] for post in slack.posts]
    assert len(texts) >= 3
    assert "\n\n".join(texts) == "\n\n".join(p.strip() for p in paragraphs)


async def test_a_9000_character_answer_is_three_parts_in_the_thread(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    code = "\n".join(f"    step_{i:03d} = run({i})  # keep going" for i in range(142))
    prose = " ".join(["words"] * 300)
    answer = f"## Plan\n\n{prose}\n\n```python\n{code}\n```\n\n{prose}"
    assert 8_900 <= len(answer) <= 9_100
    claude.script(answer)
    async with App(make_config()) as app:
        body = slack.mention(GENERAL, ALICE, "write the whole script")
        await send(slack, app, body)
    ts = body["event"]["ts"]
    assert len(slack.posts) == 3
    for post in slack.posts:
        assert post["thread_ts"] == ts
        assert len(post["text"]) <= MESSAGE_BUDGET
        assert fences(post["text"]) % 2 == 0
    # the code block runs across a cut: closed at the end of one part, reopened in the next
    assert slack.posts[1]["text"].endswith("```")
    assert slack.posts[2]["text"].startswith("```")


async def test_the_model_sees_speaker_surface_and_preceding_but_no_ids(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config()) as app:
        root = slack.say(GENERAL, BOB, "the deploy on main is red again")
        thread = root["ts"]
        slack.say(GENERAL, BOB, f"<@{ALICE}> can you look?", thread_ts=thread)
        body = slack.mention(GENERAL, ALICE, "what is going on?", thread_ts=thread)
        await send(slack, app, body)
    [request] = claude.requests
    seen = sent_to_model(request)
    assert "Alice Chen (@alice)" in seen
    assert "Bob Stone (@bob)" in seen
    assert "the deploy on main is red again" in seen
    assert "@alice can you look?" in seen
    assert f'channel \\"general\\", id {GENERAL}' in seen
    for hidden in (ALICE, BOB, BOT_USER, thread, body["event"]["ts"], slack.bot_token):
        assert hidden not in seen, hidden


async def test_without_channels_read_the_surface_is_named_by_kind_and_id(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.revoke("channels:read")
    async with App(make_config()) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "hello"))
    system = sent_to_model(claude.requests[0]["system"])
    assert f"channel, id {GENERAL}" in system
    assert 'general\\"' not in system
    assert len(slack.posts) == 1


async def test_http_mode_refuses_bad_and_stale_signatures(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config('mode = "http"\n', BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    claude.script("signed and sound")
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        statuses = []
        attempts = [
            ("forged", "not-the-secret", 0),
            ("stale", SIGNING_SECRET, 10 * 60),
            ("genuine", SIGNING_SECRET, 0),
        ]
        for text, secret, age in attempts:
            body = slack.mention(GENERAL, ALICE, text)
            raw, headers = slack.signed(body, secret, timestamp=int(time.time()) - age)
            async with session.post(url, data=raw, headers=headers) as response:
                statuses.append(response.status)
            await slack_channel(app).drain()
            await app.host.idle()
    assert statuses == [401, 401, 200]
    assert len(claude.requests) == 1
    assert "genuine" in sent_to_model(claude.requests[0]["messages"][-1])
    assert [post["text"] for post in slack.posts] == ["signed and sound"]
    assert not [call for call in slack.calls if call.method == "apps.connections.open"]


async def test_a_restart_between_two_deliveries_of_one_event_answers_once(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config()
    body = slack.mention(GENERAL, ALICE, "survive a restart")
    async with App(config) as app:
        await send(slack, app, body)
    assert len(slack.posts) == 1
    async with App(config) as app:
        await send(slack, app, body)  # Slack retries an event it thinks was lost
        await send(slack, app, slack.dm(DM, ALICE, "new question"))
    assert len(claude.requests) == 2
    assert [post["channel"] for post in slack.posts] == [GENERAL, DM]
