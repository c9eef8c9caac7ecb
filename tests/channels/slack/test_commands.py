"""Slack slash commands for the host's own commands (/memory, /forget, /usage; /schedules in
test_schedules): Socket Mode `slash_commands` envelopes and signed HTTP forms through slack-bolt
against the fake Slack, acknowledged at once, answered privately through the response URL, with
no model call and only ever the caller's own entries in the scope of the channel the command was
typed in."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.cli.compose import App
from bot.errors import ConfigError
from bot.ports.memory import MemoryScope
from channels.slack.channel import EVENTS_PATH
from channels.slack.commands import (
    MAX_ARGUMENT_CHARS,
    SlashCommand,
    clean_argument,
    command_request,
    read_command,
)
from channels.slack.events import Skip
from channels.slack.settings import SlashCommands
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, SIGNING_SECRET, MakeConfig
from tests.channels.slack.test_scenarios import send, slack_channel
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack
from tests.waiting import until

BOB_DM = "D0BOB0001"


def hooks(slack: FakeSlack) -> str:
    return f'hooks_url = "{slack.hooks_url}"\n'


async def command(slack: FakeSlack, app: App, payload: dict[str, Any]) -> str:
    """Send a slash command over Socket Mode; its private answer, once it came."""
    responses, ephemeral = len(slack.responses), len(slack.ephemeral)
    await slack.acked(await slack.push_command(payload))
    await until(lambda: len(slack.responses) > responses or len(slack.ephemeral) > ephemeral)
    if len(slack.responses) > responses:
        return str(slack.responses[-1][1]["text"])
    return str(slack.ephemeral[-1]["text"])


async def remember(slack: FakeSlack, app: App) -> None:
    """Alice says two things (one in #general, one in her DM), Bob one in #general."""
    await send(slack, app, slack.mention(GENERAL, ALICE, "the standup moved to 9:15"))
    await send(slack, app, slack.dm(DM, ALICE, "my locker code is 4411"))
    await send(slack, app, slack.mention(GENERAL, BOB, "my desk is B12"))
    await app.host.idle()


async def test_memory_and_forget_work_privately_in_a_dm_and_in_a_channel(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(hooks(slack))) as app:
        await remember(slack, app)
        await until(lambda: len(claude.requests) == 3)
        calls, posts = len(claude.requests), len(slack.posts)

        in_channel = await command(
            slack, app, slack.slash_command("/memory", "", channel=GENERAL, user=ALICE)
        )
        in_dm = await command(
            slack, app, slack.slash_command("/memory", "", channel=DM, user=ALICE)
        )
        forgot = await command(
            slack, app, slack.slash_command("/forget", "1", channel=GENERAL, user=ALICE)
        )
        after = await command(
            slack, app, slack.slash_command("/memory", "", channel=DM, user=ALICE)
        )
        bobs, _ = await app.store.memory.own(
            f"slack:{TEAM}:{BOB}", MemoryScope(f"slack:{GENERAL}"), 5
        )
    assert len(claude.requests) == calls, "slash commands never reach the model"
    assert len(slack.posts) == posts, "nothing is posted for everyone to see"
    # In #general: only what Alice said there; in her DM: what she said anywhere.
    assert "standup" in in_channel
    assert "4411" not in in_channel
    assert "B12" not in in_channel
    assert "standup" in in_dm
    assert "4411" in in_dm
    assert "B12" not in in_dm
    assert forgot.startswith("Done: I forgot entry 1")
    assert "standup" not in after
    assert "4411" in after
    assert [entry.said for entry in bobs] == ["my desk is B12"], "Bob's entry is untouched"
    assert all(body.get("response_type") == "ephemeral" for _, body in slack.responses)


async def test_usage_answers_the_callers_own_usage_privately(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(hooks(slack))) as app:
        await send(slack, app, slack.dm(DM, ALICE, "hello"))
        calls = len(claude.requests)
        mine = await command(
            slack, app, slack.slash_command("/usage", "", channel=GENERAL, user=ALICE)
        )
        bobs = await command(
            slack, app, slack.slash_command("/usage", "", channel=GENERAL, user=BOB)
        )
    assert len(claude.requests) == calls
    assert mine.startswith("Today you have used")
    assert " 0 tokens" not in mine
    assert "used 0 tokens" in bobs


async def test_renamed_commands_are_answered_and_the_default_names_are_not(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    renamed = hooks(slack) + 'commands = { memory = "/bot-memory", forget = "/bot-forget" }\n'
    async with App(make_config(renamed)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "my locker code is 4411"))
        await app.host.idle()
        listing = await command(
            slack, app, slack.slash_command("/bot-memory", "", channel=DM, user=ALICE)
        )
        envelope = await slack.push_command(
            slack.slash_command("/memory", "", channel=DM, user=ALICE)
        )
        await slack.acked(envelope)
        await slack_channel(app).drain()
        await app.host.idle()
    assert "4411" in listing
    assert len(slack.responses) == 1  # /memory is not this app's command any more


async def test_a_response_url_outside_slack_is_never_called(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    # The default hooks_url is Slack's: the fake's response URL is not under it, so the answer
    # goes as an ephemeral message instead.
    async with App(make_config()) as app:
        answer = await command(
            slack, app, slack.slash_command("/memory", "", channel=DM, user=ALICE)
        )
    assert slack.responses == []
    assert slack.ephemeral == [{"channel": DM, "user": ALICE, "text": answer}]


async def test_an_expired_response_url_falls_back_to_an_ephemeral_message(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.responses_expired = True
    async with App(make_config(hooks(slack))) as app:
        answer = await command(
            slack, app, slack.slash_command("/forget", "x", channel=GENERAL, user=ALICE)
        )
    assert answer == "Say /forget N (a number from /memory) or /forget all."
    assert slack.ephemeral == [{"channel": GENERAL, "user": ALICE, "text": answer}]


async def test_someone_outside_the_allowlist_gets_no_answer(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(hooks(slack) + f'allowed_user_ids = ["{ALICE}"]\n')) as app:
        envelope = await slack.push_command(
            slack.slash_command("/memory", "", channel=GENERAL, user=BOB)
        )
        await slack.acked(envelope)
        await slack_channel(app).drain()
        await app.host.idle()
        await until(lambda: not slack_channel(app)._background.running)
    assert slack.responses == []
    assert slack.ephemeral == []


async def test_http_mode_takes_signed_commands_and_refuses_forged_ones(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config(
        'mode = "http"\n' + hooks(slack), BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0"
    )
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        payload = slack.slash_command("/forget", "all", channel=DM, user=ALICE)
        statuses = []
        for secret, age in (("not-the-secret", 0), (SIGNING_SECRET, 600), (SIGNING_SECRET, 0)):
            raw, headers = slack.signed_form(payload, secret, timestamp=int(time.time()) - age)
            async with session.post(url, data=raw, headers=headers) as response:
                statuses.append((response.status, await response.text()))
        await until(lambda: slack.responses)
    assert [status for status, _ in statuses] == [401, 401, 200]
    assert statuses[-1][1] == ""  # the ack shows nothing; the answer comes privately
    [(_, body)] = slack.responses
    assert body["text"] == "There was nothing of yours to forget here."
    assert claude.requests == []


def test_two_host_commands_on_one_slash_command_is_a_clear_configuration_error(
    make_config: MakeConfig,
) -> None:
    with pytest.raises(ConfigError, match="different names"):
        make_config('commands = { memory = "/x", forget = "/x" }\n')


def test_a_command_name_slack_would_refuse_is_a_clear_configuration_error(
    make_config: MakeConfig,
) -> None:
    with pytest.raises(ConfigError, match="commands"):
        make_config('commands = { usage = "usage" }\n')


# --- the pure mapping ---------------------------------------------------------------------------

NAMES = SlashCommands()


def test_a_command_names_the_host_command_the_person_and_the_private_scope() -> None:
    body = {
        "team_id": TEAM,
        "channel_id": DM,
        "channel_name": "directmessage",
        "user_id": ALICE,
        "command": "/forget",
        "text": "  2\n",
        "response_url": "https://hooks.slack.com/commands/T/1/x",
    }
    read = read_command(body, NAMES)
    assert isinstance(read, SlashCommand)
    assert read == SlashCommand(
        "forget",
        "2",
        TEAM,
        DM,
        ALICE,
        True,
        "https://hooks.slack.com/commands/T/1/x",
        read.request_id,
    )
    assert read.request_id.startswith("payload:")  # no trigger_id: named by what it holds
    assert read_command({**body, "trigger_id": "13.x"}, NAMES) == replace(
        read, request_id="trigger:13.x"
    )
    request = command_request(read, received_at=datetime.now(UTC), turn_id="t")
    assert request.text == "/forget 2"
    assert request.person == f"slack:{TEAM}:{ALICE}"
    assert request.surface is not None
    assert request.surface.id == DM


@given(st.text(max_size=400))
def test_a_command_argument_is_one_bounded_printable_line(text: str) -> None:
    cleaned = clean_argument(text)
    assert len(cleaned) <= MAX_ARGUMENT_CHARS
    assert cleaned == cleaned.strip()
    assert not any(ch in cleaned for ch in "\r\n\t\x00\u2028\u202e")


_VALUE = st.none() | st.integers() | st.text(max_size=30)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "team_id": _VALUE,
            "channel_id": _VALUE,
            "user_id": _VALUE,
            "command": st.sampled_from(["/memory", "/forget", "/usage", "/schedules", "/other"])
            | _VALUE,
            "text": _VALUE,
            "channel_name": _VALUE,
            "response_url": _VALUE,
        },
    )
)
def test_any_command_payload_is_read_or_skipped_never_raises(body: dict[str, Any]) -> None:
    read = read_command(body, NAMES)
    assert isinstance(read, SlashCommand | Skip)
    if isinstance(read, SlashCommand):
        assert read.name in ("memory", "forget", "usage", "schedules")
        assert len(read.argument) <= MAX_ARGUMENT_CHARS


async def test_a_signed_command_replayed_byte_for_byte_runs_once(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config(
        'mode = "http"\n' + hooks(slack), BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0"
    )
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        raw, headers = slack.signed(slack.dm(DM, ALICE, "my locker code is 4411"), SIGNING_SECRET)
        async with session.post(url, data=raw, headers=headers) as response:
            assert response.status == 200
        await until(lambda: claude.requests)
        await app.host.idle()
        payload = slack.slash_command("/forget", "1", channel=DM, user=ALICE)
        raw, headers = slack.signed_form(payload, SIGNING_SECRET, timestamp=int(time.time()))
        statuses = []
        for _ in range(2):  # the same bytes, the same signature, within Slack's window
            async with session.post(url, data=raw, headers=headers) as response:
                statuses.append(response.status)
        await until(lambda: slack.responses)
    # The App has stopped: every command answer under way has finished.
    assert statuses == [200, 200]
    assert [body["text"] for _, body in slack.responses] == [slack.responses[0][1]["text"]], (
        "the replay was not answered, and forgot nothing"
    )
    assert slack.responses[0][1]["text"].startswith("Done: I forgot entry 1")
