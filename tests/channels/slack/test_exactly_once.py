"""Exactly once on Slack through the whole App: slack-bolt (Socket Mode and HTTP) against the fake
Slack, the real SQLite store, the model behind the fake Anthropic API.

The ack comes before any Web API lookup; redeliveries while the first delivery is still in this
process start nothing; a post whose reply was lost is found by its metadata, in this process and
after a restart; a store that cannot write (a full disk) makes HTTP answer 503 and Socket Mode
withhold its ack until space is back; event types without a handler are acknowledged. Waits are
on conditions; the only clocks turn a hang into a failure.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient
from structlog.testing import capture_logs

from bot.cli.compose import App
from bot.config import MemorySettings
from bot.ports.outbox import OutboxPart, Publication
from bot.store.sqlite import open_store
from bot.turns import ReplyRoute
from channels.slack.channel import EVENTS_PATH, SlackChannel
from channels.slack.deliver import PART_EVENT, SlackDeliverer
from tests.channels.slack.conftest import ALICE, DM, GENERAL, SIGNING_SECRET, MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack
from tests.store.sqlite.full_disk import fill, make_room
from tests.waiting import until


def slack_channel(app: App) -> SlackChannel:
    [channel] = [c for c in app.channels if isinstance(c, SlackChannel)]
    return channel


def seen_by_model(claude: FakeAnthropic) -> str:
    return json.dumps(claude.requests, ensure_ascii=False)


async def test_the_ack_never_waits_for_a_lookup_and_the_turn_still_gets_the_names(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.hold("users.info")  # Slack's Web API as slow as it likes
    claude.script("hello Alice")
    async with App(make_config()) as app:
        envelope = await slack.push(slack.dm(DM, ALICE, "hi there"))
        await slack.acked(envelope)
        assert not [call for call in slack.calls if call.method == "users.info"]
        slack.release("users.info")
        await slack.wait_for(lambda: slack.posts)
        await app.host.idle()
    assert "Alice Chen (@alice)" in seen_by_model(claude)
    assert ALICE not in seen_by_model(claude)
    assert [post["text"] for post in slack.posts] == ["hello Alice"]


async def test_redeliveries_while_the_first_is_still_in_this_process_answer_once(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.hold("users.info")
    claude.hold()
    claude.script("one answer")
    async with App(make_config()) as app:
        body = slack.mention(GENERAL, ALICE, "only once, please")
        first = await slack.push(body)
        again = await slack.push(body, retry_attempt=1)  # while the first is being taken in
        await slack.acked(first)
        await slack.acked(again)
        slack.release("users.info")
        await until(lambda: claude.requests)  # the turn is in its model call
        late = await slack.push(body, retry_attempt=2)  # while the turn runs
        await slack.acked(late)
        await slack_channel(app).drain()
        claude.release()
        await slack.wait_for(lambda: slack.posts)
        await app.host.idle()
    assert len(claude.requests) == 1
    assert [post["text"] for post in slack.posts] == ["one answer"]


async def test_a_post_whose_reply_was_lost_is_found_not_posted_again(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.fail("chat.postMessage", "internal_error", lose_reply=True)  # posted, answer lost
    claude.script("posted once")
    async with App(make_config()) as app:
        await slack.acked(await slack.push(slack.dm(DM, ALICE, "hello")))
        await slack_channel(app).drain()
        await app.host.idle()
        left = await app.store.outbox.undelivered()
    assert [post["text"] for post in slack.posts] == ["posted once"]
    assert left == []


async def test_after_a_restart_a_part_that_went_through_is_reconciled_not_reposted(
    slack: FakeSlack, make_config: MakeConfig
) -> None:
    config = make_config()
    route = ReplyRoute("slack", {"team": TEAM, "channel": DM, "thread_ts": None})
    key = f"slack:{TEAM}:{DM}"
    part = OutboxPart("turn1.0", "turn1", key, 0, route, "the answer")
    # An earlier life: the part was published, and its post went through, but the reply was lost
    # and the thread could not be read, so it was never marked delivered.
    store = await open_store(config.settings.store, MemorySettings(enabled=False))
    try:
        await store.outbox.publish(Publication(key, parts=[part]))
        await post_unconfirmed(slack, part)
    finally:
        await store.aclose()
    assert [post["text"] for post in slack.posts] == ["the answer"]

    async with App(config) as app:  # the restart
        await app.host.idle()
        [stored] = await app.store.outbox.parts("turn1")
    assert [post["text"] for post in slack.posts] == ["the answer"]
    assert stored.platform_id == slack.posts[0]["ts"]
    assert slack.posts[0]["metadata"]["event_type"] == PART_EVENT


async def post_unconfirmed(slack: FakeSlack, part: OutboxPart) -> None:
    """Post `part` through the real deliverer while Slack loses every reply and cannot be read."""
    slack.fail("chat.postMessage", "internal_error", lose_reply=True)
    slack.fail("conversations.history", "internal_error", times=10)

    async def no_wait(_: float) -> None:
        return None

    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    with pytest.raises(Exception, match="failed after"):  # it never learnt the post landed
        await SlackDeliverer(client, sleep=no_wait).post(part, None)
    slack.reset_failures()


async def test_http_mode_answers_503_on_a_full_disk_and_takes_the_redelivery(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config('mode = "http"\n', BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    claude.script("stored at last")
    body = slack.dm(DM, ALICE, "x" * 30_000)  # needs pages a full disk does not have
    raw, headers = slack.signed(body, SIGNING_SECRET)
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        await fill(app.store)
        async with session.post(url, data=raw, headers=headers) as response:
            refused = response.status
        await make_room(app.store)
        async with session.post(url, data=raw, headers=headers) as response:  # Slack retries
            taken = response.status
        async with session.post(url, data=raw, headers=headers) as response:  # and once more
            again = response.status
        await slack_channel(app).drain()
        await app.host.idle()
    assert (refused, taken, again) == (503, 200, 200)
    assert [post["text"] for post in slack.posts] == ["stored at last"]
    assert len(claude.requests) == 1


async def test_socket_mode_withholds_the_ack_on_a_full_disk(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("stored at last")
    body = slack.dm(DM, ALICE, "x" * 30_000)
    with capture_logs() as logs:
        async with App(make_config()) as app:
            await fill(app.store)
            refused = await slack.push(body)
            await until(lambda: "unavailable" in admissions(logs))
            await slack_channel(app).drain()
            await make_room(app.store)
            await slack.acked(await slack.push(body, retry_attempt=1))  # Slack redelivers
            await slack_channel(app).drain()
            await app.host.idle()
    # One websocket, in order: an ack of the first would have come before the redelivery's.
    assert refused not in slack.acks
    assert [post["text"] for post in slack.posts] == ["stored at last"]


def admissions(logs: list[dict[str, Any]]) -> list[str]:
    return [str(line["admission"]) for line in logs if line["event"] == "slack_turn_submitted"]


async def test_event_types_without_a_handler_are_acknowledged(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config('mode = "http"\n', BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    body = reaction_added(slack)
    raw, headers = slack.signed(body, SIGNING_SECRET)
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        async with session.post(url, data=raw, headers=headers) as response:
            status = response.status
    async with App(make_config()) as app:
        await slack.acked(await slack.push(reaction_added(slack)))
    assert status == 200  # bolt's default would be 404, which Slack retries
    assert claude.requests == []


# Bodies Slack sends that match no listener at all (no event type to route on): bolt answers them
# 404 by default, which Slack retries (app_rate_limited goes to the Events URL, SPEC §7 Slack).
UNROUTED = [
    {
        "token": "x",
        "type": "app_rate_limited",
        "team_id": TEAM,
        "minute_rate_limited": 1,
        "api_app_id": "A1",
    },
    {"type": "event_callback", "team_id": TEAM, "event_id": "Ev0NOEVENT"},
    {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": "U1"},
        "actions": [{"action_id": "a1", "block_id": "b1", "type": "button", "value": "v"}],
    },
]


@pytest.mark.parametrize("body", UNROUTED, ids=["app_rate_limited", "no_event", "block_actions"])
async def test_requests_no_listener_matches_are_acknowledged_too(
    body: dict[str, Any], slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config('mode = "http"\n', BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    raw, headers = slack.signed(body, SIGNING_SECRET)
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        async with session.post(url, data=raw, headers=headers) as response:
            status = response.status
        bad_headers = {**headers, "X-Slack-Signature": "v0=" + "0" * 64}
        async with session.post(url, data=raw, headers=bad_headers) as response:
            forged = response.status
    async with App(make_config()) as app:
        await slack.acked(await slack.push(body))
    assert (status, forged) == (200, 401)  # acknowledged, but only when signed
    assert claude.requests == []


def reaction_added(slack: FakeSlack) -> dict[str, Any]:
    message = slack.say(GENERAL, ALICE, "nice")
    body = slack.event_body(GENERAL, message, "reaction_added")
    body["event"] = {
        "type": "reaction_added",
        "user": ALICE,
        "reaction": "thumbsup",
        "item": {"type": "message", "channel": GENERAL, "ts": message["ts"]},
        "event_ts": message["ts"],
    }
    return body
