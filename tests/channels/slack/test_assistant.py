"""Slack's assistant pane (Agents & AI apps): recorded payloads through the pure mapping, then the
whole App with slack-bolt against the fake Slack (which checks the assistant.threads.* methods'
arguments and scopes as Slack does)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bot.cli.compose import App
from bot.errors import ConfigError
from channels.slack import assistant, events
from channels.slack.assistant import TITLE_MAX_CHARS, AssistantThread
from channels.slack.events import Skip
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import ASSISTANT_OFF, TEAM, FakeSlack

PAYLOADS = Path(__file__).parent / "payloads"
BOT = events.BotIdentity(user_id="U0LAN0Z89", bot_id="B0LAN0Z89")
RANDOM = "C0RANDOM1"
SECRET = "C0SECRET1"  # a channel the bot cannot see
PROMPTS = """
assistant_prompts = [
  { title = "Plan my day", message = "Help me plan my day." },
  { title = "Explain", message = "Explain the last message in simple words." },
]
"""


def payload(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    return loaded


# --- the pure mapping ---------------------------------------------------------------------------


def test_a_recorded_thread_start_names_the_dm_thread_person_and_open_channel() -> None:
    thread = assistant.read_assistant_thread(payload("assistant_thread_started"))
    assert thread == AssistantThread(
        event_type="assistant_thread_started",
        team="T123ABC456",
        channel="D123ABC456",
        thread_ts="1729999327.187299",
        user="U123ABC456",
        viewing="C123ABC456",
    )


def test_a_recorded_context_change_names_the_new_channel() -> None:
    thread = assistant.read_assistant_thread(payload("assistant_thread_context_changed"))
    assert isinstance(thread, AssistantThread)
    assert (thread.event_type, thread.viewing) == ("assistant_thread_context_changed", "C987ZYX654")


@pytest.mark.parametrize(
    "change",
    [
        {"assistant_thread": None},
        {"assistant_thread": {"channel_id": "D1", "user_id": "U1"}},  # no thread_ts
        {"assistant_thread": {"channel_id": "D1", "user_id": "U1", "thread_ts": "soon"}},
        {"type": "app_mention"},
    ],
)
def test_a_malformed_assistant_event_is_skipped(change: dict[str, Any]) -> None:
    body = payload("assistant_thread_started")
    body["event"] = {**body["event"], **change}
    assert isinstance(assistant.read_assistant_thread(body), Skip)


def test_without_a_context_the_open_channel_is_unknown() -> None:
    body = payload("assistant_thread_started")
    del body["event"]["assistant_thread"]["context"]
    thread = assistant.read_assistant_thread(body)
    assert isinstance(thread, AssistantThread)
    assert thread.viewing is None


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_FIELDS = st.sampled_from(["channel_id", "thread_ts", "user_id", "context", "team_id"])


@given(
    st.fixed_dictionaries(
        {"type": st.sampled_from(sorted(assistant.ASSISTANT_EVENTS)) | st.text(max_size=8)},
        optional={"assistant_thread": st.dictionaries(_FIELDS, _JSON) | _JSON},
    ),
    st.none() | st.text(max_size=12),
)
def test_any_assistant_event_is_read_or_skipped_never_raises(
    event: dict[str, Any], team: str | None
) -> None:
    found = assistant.read_assistant_thread({"event": event, "team_id": team})
    assert isinstance(found, AssistantThread | Skip)
    if isinstance(found, AssistantThread):
        assert all(isinstance(v, str) and v for v in (found.channel, found.thread_ts, found.user))
        assert found.viewing is None or isinstance(found.viewing, str)


def test_a_recorded_assistant_thread_message_is_a_dm_thread_conversation() -> None:
    message = events.read_event(payload("message_im_assistant_thread"), BOT)
    assert isinstance(message, events.SlackMessage)
    assert message.assistant
    assert events.conversation_key(message) == "slack:T123ABC456:D123ABC456:1729999327.187299"
    route = events.route_for(message)
    assert route.values["thread_ts"] == "1729999327.187299"  # answered in the thread
    assert route.values["assistant"] is True


def test_a_plain_dm_is_no_assistant_thread() -> None:
    body = payload("message_im_assistant_thread")
    del body["event"]["assistant_thread"]
    message = events.read_event(body, BOT)
    assert isinstance(message, events.SlackMessage)
    assert not message.assistant
    assert "assistant" not in events.route_for(message).values


def test_a_title_is_the_first_line_of_words_cut_at_a_word() -> None:
    assert assistant.thread_title("  Plan\nmy\tday\u200b please ") == "Plan my day please"
    long = "word " * 40
    title = assistant.thread_title(long)
    assert title is not None
    assert title.endswith("…")
    assert len(title) <= TITLE_MAX_CHARS
    assert assistant.thread_title("\n\u202e\x00 ") is None


@given(st.text(max_size=400))
def test_a_title_is_one_bounded_line_of_printable_characters(text: str) -> None:
    title = assistant.thread_title(text)
    if title is None:
        assert not "".join(ch for ch in text if unicodedata.category(ch)[0] not in "CZ")
        return
    assert 0 < len(title) <= TITLE_MAX_CHARS
    assert title == title.strip()
    assert all(unicodedata.category(ch)[0] != "C" for ch in title)  # no controls, no bidi
    assert all(ch == " " or unicodedata.category(ch)[0] != "Z" for ch in title)
    assert "  " not in title


def test_more_than_four_prompts_is_a_clear_configuration_error(make_config: MakeConfig) -> None:
    five = ", ".join(f'{{ title = "t{i}", message = "m{i}" }}' for i in range(5))
    with pytest.raises(ConfigError, match=r"slack\.assistant_prompts.*at most 4"):
        make_config(f"assistant_prompts = [{five}]\n")


def test_a_prompt_without_a_message_is_a_clear_configuration_error(
    make_config: MakeConfig,
) -> None:
    with pytest.raises(ConfigError, match=r"slack\.assistant_prompts\[0\]\.message: required"):
        make_config('assistant_prompts = [{ title = "Plan" }]\n')


# --- the whole App ------------------------------------------------------------------------------


async def start_thread(slack: FakeSlack, app: App, viewing: str | None = GENERAL) -> str:
    body = slack.assistant_thread_started(DM, ALICE, viewing=viewing)
    await send(slack, app, body)
    thread: str = body["event"]["assistant_thread"]["thread_ts"]
    return thread


def methods(slack: FakeSlack) -> list[str]:
    wanted = ("chat.", "reactions.", "assistant.")
    return [call.method for call in slack.calls if call.method.startswith(wanted)]


async def test_a_new_thread_gets_the_configured_prompts_and_no_model_call(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(PROMPTS)) as app:
        thread = await start_thread(slack, app)
        await slack.wait_for(lambda: slack.suggested)
    assert slack.suggested == {
        (DM, thread): {
            "title": "How can I help?",
            "prompts": [
                {"title": "Plan my day", "message": "Help me plan my day."},
                {"title": "Explain", "message": "Explain the last message in simple words."},
            ],
        }
    }
    assert claude.requests == []
    assert slack.posts == []


async def test_without_prompts_a_new_thread_calls_nothing(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config()) as app:
        await start_thread(slack, app)
    assert methods(slack) == []
    assert claude.requests == []


async def test_a_thread_opened_by_someone_outside_the_allowlist_gets_nothing(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(PROMPTS + f'allowed_user_ids = ["{BOB}"]\n')) as app:
        await start_thread(slack, app)
    assert methods(slack) == []


async def test_a_message_in_the_thread_is_answered_there_with_status_and_title(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("Start with the hardest task.", "Then lunch.")
    async with App(make_config()) as app:
        thread = await start_thread(slack, app)
        await send(
            slack, app, slack.assistant_message(DM, ALICE, "Plan my\nday?", thread_ts=thread)
        )
        await slack.wait_for(lambda: slack.status_log[-1][2] == "")
        await send(slack, app, slack.assistant_message(DM, ALICE, "and then?", thread_ts=thread))
        await slack.wait_for(lambda: len(slack.status_log) == 4)
        keys = await app.store.history.conversations()
    assert [(p["channel"], p["thread_ts"], p["text"]) for p in slack.posts] == [
        (DM, thread, "Start with the hardest task."),
        (DM, thread, "Then lunch."),
    ]
    assert keys == [f"slack:{TEAM}:{DM}:{thread}"]  # one conversation per assistant thread
    assert slack.status_log == [(DM, thread, "is thinking…"), (DM, thread, "")] * 2
    assert slack.thread_status == {}
    assert slack.titles == {(DM, thread): "Plan my day?"}  # from the first message only
    assert slack.reactions == []  # the status is the progress sign here
    # The status is up before the answer is posted and taken down after it.
    called = [m for m in methods(slack) if m != "assistant.threads.setTitle"]
    status = "assistant.threads.setStatus"
    assert called == [status, "chat.postMessage", status] * 2
    assert methods(slack).count("assistant.threads.setTitle") == 1


async def test_a_marked_thread_message_gets_the_status_without_a_seen_start(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    # As after a restart: the thread started before this process, Slack marks its messages.
    root = slack.assistant_thread_started(DM, ALICE)["event"]["assistant_thread"]["thread_ts"]
    async with App(make_config()) as app:
        await send(slack, app, slack.assistant_message(DM, ALICE, "still there?", thread_ts=root))
        await slack.wait_for(lambda: len(slack.status_log) == 2)
    assert [p["thread_ts"] for p in slack.posts] == [root]
    assert slack.titles == {}  # not ours to name: its first message came before


async def test_the_open_channel_reaches_the_turn_by_name_never_by_id(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.add_channel(RANDOM, "random")
    async with App(make_config()) as app:
        thread = await start_thread(slack, app, viewing=GENERAL)
        await send(slack, app, slack.assistant_context_changed(DM, thread, ALICE, viewing=RANDOM))
        await send(slack, app, slack.assistant_message(DM, ALICE, "what's here?", thread_ts=thread))
        await send(slack, app, slack.assistant_context_changed(DM, thread, ALICE, viewing=SECRET))
        await send(slack, app, slack.assistant_message(DM, ALICE, "and here?", thread_ts=thread))
        await send(slack, app, slack.assistant_context_changed(DM, thread, ALICE, viewing=None))
        await send(slack, app, slack.assistant_message(DM, ALICE, "and now?", thread_ts=thread))
    seen = [json.dumps(request, ensure_ascii=False) for request in claude.requests]
    assert 'Open beside this conversation: a channel named \\"random\\".' in seen[0]
    assert "Open beside this conversation: a channel." in seen[1]  # one the bot cannot see
    assert "Open beside" not in seen[2]  # Slack named none; nothing stale either
    for request in seen:  # the ids stay route-side
        assert RANDOM not in request
        assert GENERAL not in request
        assert SECRET not in request


async def test_refused_assistant_methods_still_answer_with_one_warning_each(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.assistant_view = False  # the app without "Agents & AI Apps"
    claude.script("one", "two")
    with capture_logs() as logs:
        async with App(make_config(PROMPTS)) as app:
            body = slack.assistant_thread_started(DM, ALICE)
            thread = body["event"]["assistant_thread"]["thread_ts"]
            await send(slack, app, body)
            for text in ("first?", "second?"):
                await send(slack, app, slack.assistant_message(DM, ALICE, text, thread_ts=thread))
            await slack.wait_for(lambda: len(slack.reactions) == 4)
    assert [p["text"] for p in slack.posts] == ["one", "two"]
    refused = [log for log in logs if log["event"] == "slack_assistant_refused"]
    assert sorted(log["method"] for log in refused) == [
        "assistant.threads.setStatus",
        "assistant.threads.setSuggestedPrompts",
        "assistant.threads.setTitle",
    ]
    assert all(log["error"] == ASSISTANT_OFF and "assistant:write" in log["fix"] for log in refused)
    assert all(log["log_level"] == "warning" for log in refused)
    # The progress sign falls back to the reaction on the person's message.
    assert [action for action, *_ in slack.reactions] == ["add", "remove"] * 2
    # A method refused to the app is not called again: one refused call of each.
    assert methods(slack).count("assistant.threads.setStatus") == 1


async def test_without_assistant_write_the_status_still_shows_through_chat_write(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.revoke("assistant:write")
    with capture_logs() as logs:
        async with App(make_config(PROMPTS)) as app:
            thread = await start_thread(slack, app)
            await send(slack, app, slack.assistant_message(DM, ALICE, "hi", thread_ts=thread))
            await slack.wait_for(lambda: len(slack.status_log) == 2)
    assert len(slack.posts) == 1
    assert slack.suggested == {}
    assert slack.titles == {}
    refused = {(log["method"], log["error"]) for log in logs if log["event"].endswith("refused")}
    assert refused == {
        ("assistant.threads.setSuggestedPrompts", "missing_scope"),
        ("assistant.threads.setTitle", "missing_scope"),
    }


async def test_a_status_failing_for_a_while_falls_back_once_without_a_warning(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.fail("assistant.threads.setStatus", "internal_error")
    with capture_logs() as logs:
        async with App(make_config()) as app:
            thread = await start_thread(slack, app)
            for text in ("first?", "second?"):
                await send(slack, app, slack.assistant_message(DM, ALICE, text, thread_ts=thread))
            await slack.wait_for(lambda: len(slack.status_log) == 2)
    assert len(slack.posts) == 2
    assert [action for action, *_ in slack.reactions] == ["add", "remove"]  # the first turn
    assert slack.status_log == [(DM, thread, "is thinking…"), (DM, thread, "")]  # the second
    assert not [log for log in logs if log["log_level"] == "warning"]
