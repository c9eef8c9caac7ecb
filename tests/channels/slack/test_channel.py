"""The Slack channel through real slack-bolt (Socket Mode and HTTP) against the fake Slack.

The host is replaced by a recording sink here; tests/channels/slack/test_scenarios.py runs the
whole composition.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bot.config import Secrets
from bot.errors import ConfigError
from bot.store.sql.request_codec import decode_request, encode_request
from bot.turns import SurfaceKind, TurnRequest
from channels.slack.channel import EVENTS_PATH, SlackChannel
from channels.slack.directory import HISTORY_PAGE, MAX_LOOKUPS_PER_MESSAGE, THREAD_PAGES
from channels.slack.settings import SlackSettings
from tests.channels.slack.conftest import (
    ALICE,
    BOB,
    DM,
    GENERAL,
    GROUP,
    SIGNING_SECRET,
    RecordingSink,
)
from tests.fakes.slack import BOT_USER, FakeSlack

Start = Callable[..., Awaitable[SlackChannel]]


def secrets_for(slack: FakeSlack) -> Secrets:
    return Secrets(
        {
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_APP_TOKEN": slack.app_token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        }
    )


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
async def start(slack: FakeSlack, sink: RecordingSink) -> AsyncIterator[Start]:
    started: list[SlackChannel] = []

    async def start(http: web.Application | None = None, **settings: Any) -> SlackChannel:
        config = SlackSettings(enabled=True, api_url=slack.api_url, **settings)
        channel = SlackChannel(config, secrets_for(slack), http)
        sink.look_up = channel.look_up  # what the host does when the turn starts
        await channel.start(sink)
        started.append(channel)
        return channel

    yield start
    for channel in started:
        await channel.stop()


async def deliver(slack: FakeSlack, channel: SlackChannel, body: dict[str, Any]) -> None:
    """Push one event over Socket Mode and wait until the channel has dealt with it."""
    await slack.acked(await slack.push(body))
    await channel.drain()


def visible(request: TurnRequest) -> str:
    """Everything in a request the model may see."""
    return repr((request.text, request.speaker, request.surface, request.preceding))


async def test_a_channel_mention_becomes_one_request(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    body = slack.mention(GENERAL, ALICE, "what is  the plan?")
    await deliver(slack, channel, body)
    [request] = sink.requests
    ts = body["event"]["ts"]
    assert request.conversation_key == f"slack:T0FAKE:{GENERAL}:{ts}"
    assert request.text == "what is the plan?"
    assert request.speaker is not None
    assert (request.speaker.name, request.speaker.handle) == ("Alice Chen", "alice")
    assert request.surface is not None
    assert (request.surface.kind, request.surface.id, request.surface.name) == (
        SurfaceKind.CHANNEL,
        GENERAL,
        "general",
    )
    assert request.route is not None
    assert request.route.values["thread_ts"] == ts
    assert request.route.values["message_ts"] == ts
    assert request.person == f"slack:T0FAKE:{ALICE}"


async def test_a_dm_needs_no_mention(slack: FakeSlack, start: Start, sink: RecordingSink) -> None:
    channel = await start()
    await deliver(slack, channel, slack.dm(DM, ALICE, "hello there"))
    [request] = sink.requests
    assert request.conversation_key == f"slack:T0FAKE:{DM}"
    assert request.text == "hello there"
    assert request.surface is not None
    assert (request.surface.kind, request.surface.name, request.surface.shared) == (
        SurfaceKind.DM,
        "alice",
        False,
    )
    assert request.route is not None
    assert request.route.values["thread_ts"] is None
    assert not any(
        call.method.startswith("conversations.") and call.method != "conversations.info"
        for call in slack.calls
    )


async def test_a_channel_message_without_mention_starts_nothing(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    first = slack.mention(GENERAL, ALICE, "start")
    await deliver(slack, channel, first)
    follow_up = slack.channel_message(GENERAL, ALICE, "and more", thread_ts=first["event"]["ts"])
    await deliver(slack, channel, follow_up)
    assert len(sink.requests) == 1


async def test_a_redelivered_event_starts_one_turn(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    body = slack.dm(DM, ALICE, "once please")
    await deliver(slack, channel, body)
    await slack.acked(await slack.push(body, retry_attempt=1))
    await channel.drain()
    assert len(sink.requests) == 1


async def test_a_slow_ack_redelivery_starts_one_turn(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    slack.ack_deadline = 0.0
    await slack.push(slack.dm(DM, ALICE, "are you there?"))
    await slack.wait_for(lambda: len(slack.envelopes) == 2 and len(slack.acks) == 2)
    await channel.drain()
    assert [envelope.retry_attempt for envelope in slack.envelopes] == [0, 1]
    assert len(sink.requests) == 1


async def test_message_and_app_mention_of_one_message_start_one_turn(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    as_mention = slack.mention(GROUP, BOB, "what did we decide?")
    as_message = slack.event_body(GROUP, as_mention["event"], "message", channel_type="im")
    as_message["event"]["channel"] = GROUP
    await deliver(slack, channel, as_message)
    await deliver(slack, channel, as_mention)
    assert len(sink.requests) == 1


async def test_a_group_dm_mention_is_a_group_surface(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    await deliver(slack, channel, slack.mention(GROUP, BOB, "summary?"))
    [request] = sink.requests
    assert request.surface is not None
    assert (request.surface.kind, request.surface.shared) == (SurfaceKind.GROUP, True)


async def test_preceding_messages_are_resolved_and_ids_stay_hidden(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    root = slack.say(GENERAL, BOB, "the deploy is red again")
    thread = root["ts"]
    slack.say(GENERAL, ALICE, f"<@{BOB}> did you\nrestart it?", thread_ts=thread)
    slack.say(GENERAL, "U0NEWBIE1", "joined", thread_ts=thread, subtype="channel_join")
    body = slack.mention(GENERAL, ALICE, "can you look?", thread_ts=thread)
    await deliver(slack, channel, body)
    [request] = sink.requests
    assert request.conversation_key == f"slack:T0FAKE:{GENERAL}:{thread}"
    assert [(m.name, m.handle, m.text) for m in request.preceding] == [
        ("Bob Stone", "bob", "the deploy is red again"),
        ("Alice Chen", "alice", "@bob did you\nrestart it?"),
    ]
    shown = visible(request)
    for hidden in (ALICE, BOB, BOT_USER, thread, body["event"]["ts"]):
        assert hidden not in shown


async def test_a_request_stored_by_an_older_version_is_named_like_a_new_one(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    """Before `Lookups` had a field of its own, the route carried them ("lookup"); a request
    still pending from then is read into the new form and named the same way."""
    channel = await start()
    root = slack.say(GENERAL, BOB, "the deploy is red again")
    body = slack.mention(GENERAL, ALICE, f"<@{BOB}> can you look?", thread_ts=root["ts"])
    await deliver(slack, channel, body)
    [stored], [named] = sink.stored, sink.requests
    lookups = stored.lookups
    assert lookups is not None
    document = json.loads(encode_request(stored))
    del document["lookups"]
    document["route"]["values"]["lookup"] = {  # as the older `pending_request` wrote it
        "text": lookups.text,
        "event_type": "app_mention",
        "channel_type": lookups.surface_type,
        "thread_ts": lookups.thread,
        "bot_name": lookups.speaker_name,
        "bot_user_id": lookups.bot_user,
        "bot_id": lookups.bot_author,
        "session": False,
    }
    old = decode_request(json.dumps(document))
    assert old.lookups == lookups
    assert old.route == stored.route
    assert old.named(await channel.look_up(lookups)) == named
    assert named.text == "@bob can you look?"
    assert [m.text for m in named.preceding] == ["the deploy is red again"]


async def test_preceding_starts_after_the_bots_last_answer(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    slack.say(GENERAL, BOB, "old news")
    slack.say(GENERAL, BOT_USER, "an earlier answer", bot_id="BBOT0001")
    slack.say(GENERAL, BOB, "fresh news")
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, "thoughts?"))
    [request] = sink.requests
    assert [m.text for m in request.preceding] == ["fresh news"]


async def test_missing_channels_read_names_the_surface_by_kind_and_id(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    slack.revoke("channels:read")
    channel = await start()
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, "hi"))
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, "again"))
    first, second = sink.requests
    for request in (first, second):
        assert request.surface is not None
        assert (request.surface.kind, request.surface.id, request.surface.name) == (
            SurfaceKind.CHANNEL,
            GENERAL,
            None,
        )
    infos = [call for call in slack.calls if call.method == "conversations.info"]
    assert len(infos) == 1  # the missing scope is remembered, not asked about every turn


async def test_channel_names_can_be_switched_off(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start(resolve_channel_names=False)
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, "hi"))
    [request] = sink.requests
    assert request.surface is not None
    assert request.surface.name is None
    assert not [call for call in slack.calls if call.method == "conversations.info"]


async def test_users_info_is_cached(slack: FakeSlack, start: Start, sink: RecordingSink) -> None:
    channel = await start()
    await deliver(slack, channel, slack.dm(DM, ALICE, "one"))
    await deliver(slack, channel, slack.dm(DM, ALICE, "two"))
    assert len(sink.requests) == 2
    assert len([call for call in slack.calls if call.method == "users.info"]) == 1


async def test_a_failed_users_info_is_cached_too(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    ghost = "U0GHOST01"  # users.info answers user_not_found
    await deliver(slack, channel, slack.dm(DM, ALICE, f"ask <@{ghost}>"))
    await deliver(slack, channel, slack.dm(DM, ALICE, f"ask <@{ghost}> again"))
    assert len(sink.requests) == 2
    asked = [call for call in slack.calls if call.method == "users.info"]
    assert [call.params.get("user") for call in asked].count(ghost) == 1


async def test_one_message_makes_a_bounded_number_of_lookups(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    crowd = " ".join(f"<@U0CROWD{n:03d}>" for n in range(40))
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, f"ping {crowd}"))
    [request] = sink.requests
    assert request.speaker is not None
    assert request.speaker.handle == "alice"  # the speaker is looked up first
    lookups = [c for c in slack.calls if c.method in {"users.info", "conversations.info"}]
    assert len(lookups) <= MAX_LOOKUPS_PER_MESSAGE


async def test_allowlists_refuse_and_log(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start(allowed_channel_ids=[GENERAL], allowed_user_ids=[ALICE])
    with structlog.testing.capture_logs() as logs:
        await deliver(slack, channel, slack.mention(GROUP, ALICE, "not here"))
        await deliver(slack, channel, slack.mention(GENERAL, BOB, "not you"))
        await deliver(slack, channel, slack.mention(GENERAL, ALICE, "fine"))
    assert [request.text for request in sink.requests] == ["fine"]
    refused = [entry for entry in logs if entry["event"] == "slack_event_not_allowed"]
    assert [entry["reason"] for entry in refused] == ["channel", "user"]


async def test_other_bots_are_ignored_by_default(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    body = slack.dm(DM, "U0DEPLOY1", "deploy finished")
    body["event"]["bot_id"] = "B0DEPLOY1"
    body["event"]["bot_profile"] = {"id": "B0DEPLOY1", "name": "Deploy Bot"}
    channel = await start()
    await deliver(slack, channel, body)
    assert sink.requests == []


async def test_other_bots_when_let_in_are_named_as_bots(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    body = slack.dm(DM, "U0DEPLOY1", "deploy finished")
    body["event"]["bot_id"] = "B0DEPLOY1"
    body["event"]["bot_profile"] = {"id": "B0DEPLOY1", "name": "Deploy Bot"}
    channel = await start(ignore_other_bots=False)
    await deliver(slack, channel, body)
    [request] = sink.requests
    assert request.speaker is not None
    assert request.speaker.name == "Deploy Bot"


async def test_a_bare_mention_starts_nothing(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    channel = await start()
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, f"<@{BOT_USER}>"))
    assert sink.requests == []


async def test_lookups_that_fail_degrade_instead_of_dropping_the_turn(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    slack.fail("users.info", "internal_error", times=10)
    slack.fail("conversations.history", "internal_error", times=10)
    channel = await start()
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, "still there?"))
    [request] = sink.requests
    assert request.speaker is not None
    assert request.speaker.name == "someone"
    assert request.preceding == ()


async def test_missing_tokens_are_named(slack: FakeSlack) -> None:
    settings = SlackSettings(enabled=True, api_url=slack.api_url)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN is not set"):
        SlackChannel(settings, Secrets({}))
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN is not set"):
        SlackChannel(settings, Secrets({"SLACK_BOT_TOKEN": "xoxb-1"}))
    http = SlackSettings(enabled=True, mode="http")
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET is not set"):
        SlackChannel(http, Secrets({"SLACK_BOT_TOKEN": "xoxb-1"}), web.Application())


async def test_a_wrong_app_token_fails_start_clearly(slack: FakeSlack, sink: RecordingSink) -> None:
    settings = SlackSettings(enabled=True, api_url=slack.api_url)
    secrets = Secrets({"SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": "xapp-wrong"})
    channel = SlackChannel(settings, secrets)
    with pytest.raises(ConfigError, match="refused SLACK_APP_TOKEN \\(invalid_auth\\)") as info:
        await channel.start(sink)
    assert "xapp-wrong" not in str(info.value)


async def test_a_wrong_bot_token_fails_start_clearly(slack: FakeSlack, sink: RecordingSink) -> None:
    settings = SlackSettings(enabled=True, api_url=slack.api_url.rstrip("/"))
    secrets = Secrets({"SLACK_BOT_TOKEN": "xoxb-wrong", "SLACK_APP_TOKEN": slack.app_token})
    channel = SlackChannel(settings, secrets)
    with pytest.raises(ConfigError, match="refused SLACK_BOT_TOKEN \\(invalid_auth\\)"):
        await channel.start(sink)


# --- HTTP mode ----------------------------------------------------------------------------------


@pytest.fixture
async def http_client(
    slack: FakeSlack, start: Start
) -> AsyncIterator[tuple[TestClient[web.Request, web.Application], SlackChannel]]:
    app = web.Application()
    channel = await start(http=app, mode="http")
    async with TestClient(TestServer(app)) as client:
        yield client, channel


async def test_http_mode_takes_signed_events(
    slack: FakeSlack,
    http_client: tuple[TestClient[web.Request, web.Application], SlackChannel],
    sink: RecordingSink,
) -> None:
    client, channel = http_client
    raw, headers = slack.signed(slack.mention(GENERAL, ALICE, "over http"), SIGNING_SECRET)
    response = await client.post(EVENTS_PATH, data=raw, headers=headers)
    assert response.status == 200
    await channel.drain()
    assert [request.text for request in sink.requests] == ["over http"]


@pytest.mark.parametrize(
    ("secret", "age"),
    [("not-the-secret", 0), (SIGNING_SECRET, 10 * 60)],
    ids=["bad signature", "stale timestamp"],
)
async def test_http_mode_refuses_bad_or_stale_signatures(
    slack: FakeSlack,
    http_client: tuple[TestClient[web.Request, web.Application], SlackChannel],
    sink: RecordingSink,
    secret: str,
    age: int,
) -> None:
    client, channel = http_client
    body = slack.mention(GENERAL, ALICE, "forged")
    raw, headers = slack.signed(body, secret, timestamp=int(time.time()) - age)
    response = await client.post(EVENTS_PATH, data=raw, headers=headers)
    assert response.status == 401
    await channel.drain()
    assert sink.requests == []


async def test_http_mode_answers_the_url_verification_challenge(
    slack: FakeSlack,
    http_client: tuple[TestClient[web.Request, web.Application], SlackChannel],
) -> None:
    client, _ = http_client
    body = {"token": "t", "challenge": "c-123", "type": "url_verification"}
    raw, headers = slack.signed(body, SIGNING_SECRET)
    response = await client.post(EVENTS_PATH, data=raw, headers=headers)
    assert response.status == 200
    assert (await response.json())["challenge"] == "c-123"


async def test_a_thread_is_read_from_the_bots_last_turn_there(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    """Each turn reads the thread from the bot's last turn an earlier read found, not from its
    root again; what it names as preceding is the same."""
    channel = await start()
    thread = slack.say(GENERAL, BOB, "the deploy is red again")["ts"]
    answers = []
    for number, news in enumerate(["first news", "second news", "third news"]):
        slack.say(GENERAL, BOB, news, thread_ts=thread)
        body = slack.mention(GENERAL, ALICE, f"question {number}", thread_ts=thread)
        await deliver(slack, channel, body)
        answers.append(
            slack.say(GENERAL, BOT_USER, "an answer", thread_ts=thread, bot_id="B1")["ts"]
        )
    assert [[m.text for m in r.preceding] for r in sink.requests] == [
        ["the deploy is red again", "first news"],
        ["second news"],
        ["third news"],
    ]
    reads = [call.params for call in slack.calls if call.method == "conversations.replies"]
    assert [read.get("oldest") for read in reads] == [None, None, answers[0]]


async def test_a_thread_too_long_to_read_gives_no_preceding_rather_than_old_ones(
    slack: FakeSlack, start: Start, sink: RecordingSink
) -> None:
    root = slack.say(GENERAL, BOB, "a very long thread")
    for i in range(HISTORY_PAGE * THREAD_PAGES):
        slack.say(GENERAL, BOB, f"reply {i}", thread_ts=root["ts"])
    channel = await start()
    await deliver(slack, channel, slack.mention(GENERAL, ALICE, "tl;dr?", thread_ts=root["ts"]))
    [request] = sink.requests
    assert request.preceding == ()
    assert len([call for call in slack.calls if call.method == "conversations.replies"]) == 5


async def test_a_normal_start_logs_no_warning(
    slack: FakeSlack,
    start: Start,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The token in the environment, as in production: bolt is handed our client and says
    nothing about a token it will not use."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", slack.bot_token)
    with caplog.at_level(logging.WARNING):
        await start()
    assert [record.getMessage() for record in caplog.records] == []
