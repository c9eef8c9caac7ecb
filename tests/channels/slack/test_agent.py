"""Slack's agent messaging (`messaging = "agent"`): a session per thread shown processing while a
turn works and active after it, titled from its first message; the Messages tab's prompts; and
Slack's stop button cancelling a slow answer. The whole App with slack-bolt on Socket Mode
against the fake Slack, the model the fake Anthropic."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bot.cli.compose import App
from bot.turns import Outcome
from channels.slack import assistant, events
from channels.slack.events import Skip
from channels.slack.sessions import Stop, read_stop
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send, settle, slack_channel
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack
from tests.waiting import until

AGENT = 'messaging = "agent"\n'
PROMPTS = '\nassistant_prompts = [{ title = "Plan", message = "Plan my day." }]\n'


async def test_a_dm_thread_shows_processing_then_active_and_is_titled(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("Start with the hardest task.", "Then lunch.")
    async with App(make_config(AGENT)) as app:
        first = slack.dm(DM, ALICE, "Plan my\nday, <!channel>?")
        await send(slack, app, first)
        thread = first["event"]["ts"]
        await slack.wait_for(lambda: len(slack.session_log) == 2)
        await send(slack, app, slack.dm(DM, ALICE, "and then?", thread_ts=thread))
        await slack.wait_for(lambda: len(slack.session_log) == 4)
        keys = await app.store.history.conversations()
    assert slack.session_log == [(DM, thread, "processing"), (DM, thread, "active")] * 2
    # The top-level message opened a thread: answered there, one conversation per thread.
    assert [(p["thread_ts"], p["text"]) for p in slack.posts] == [
        (thread, "Start with the hardest task."),
        (thread, "Then lunch."),
    ]
    assert keys == [f"slack:{TEAM}:{DM}:{thread}"]
    # Titled once, from the first message: one line, bounded, no Slack markup.
    assert slack.sessions[(DM, thread)]["title"] == "Plan my day, @channel?"
    assert [c.method for c in slack.calls].count("agents.sessions.rename") == 1
    assert slack.reactions == []  # the session's status is the progress sign
    # Active only once the answer was posted (the deliverer sets it after delivery).
    statuses = [c.at for c in slack.calls if c.method == "agents.sessions.setStatus"]
    assert slack.posts[0]["at"] < statuses[1]


async def test_a_channel_mention_is_a_session_too(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("Shipped.")
    async with App(make_config(AGENT)) as app:
        body = slack.mention(GENERAL, ALICE, "ship it")
        await send(slack, app, body)
        await slack.wait_for(lambda: len(slack.session_log) == 2)
    ts = body["event"]["ts"]
    assert slack.session_log == [(GENERAL, ts, "processing"), (GENERAL, ts, "active")]
    assert slack.posts[0]["thread_ts"] == ts


async def test_opening_the_messages_tab_offers_the_prompts_without_a_model_call(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config(AGENT + PROMPTS)) as app:
        await send(slack, app, slack.home_opened(DM, ALICE, tab="home"))
        await send(slack, app, slack.home_opened(DM, ALICE))
        await slack.wait_for(lambda: slack.suggested)
    assert slack.suggested == {
        (DM, ""): {
            "title": "How can I help?",
            "prompts": [{"title": "Plan", "message": "Plan my day."}],
        }
    }
    assert claude.requests == []
    assert slack.posts == []


async def test_the_assistant_pane_stays_the_default_for_a_config_without_the_key(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    async with App(make_config()) as app:
        await send(slack, app, slack.dm(DM, ALICE, "hello"))
    assert slack.session_log == []
    assert slack.posts[0]["thread_ts"] is None  # a DM's top level, as before


async def test_the_stop_button_cancels_a_slow_answer_and_keeps_the_continuity_note(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.hang_midstream("First, list the tasks. Then")
    claude.script("Sure: the tasks are A and B.")
    async with App(make_config(AGENT + "stream_interval = 0.0\n")) as app:
        first = slack.dm(DM, ALICE, "plan my week")
        thread = first["event"]["ts"]
        await slack.acked(await slack.push(first))
        await slack.wait_for(lambda: any("First, list" in p["text"] for p in slack.posts))
        assert slack.sessions[(DM, thread)]["status"] == "processing"

        stop = slack.stop_button(DM, thread, ALICE)
        await settle(slack, app, await slack.push(stop))
        await until(lambda: claude.abandoned, state=lambda: slack.session_log)
        await slack.wait_for(lambda: slack.sessions[(DM, thread)]["status"] == "active")
        history = await app.store.history.load(f"slack:{TEAM}:{DM}:{thread}")
        [record] = await app.store.records.recent(f"slack:{TEAM}:{DM}:{thread}", limit=1)

        # The conversation goes on, knowing the last answer was stopped; Slack delivering the
        # stop again while that answer is written changes nothing.
        claude.hold()
        await slack.acked(await slack.push(slack.dm(DM, ALICE, "just the tasks", thread_ts=thread)))
        await until(lambda: len(claude.requests) == 2)
        with capture_logs() as logs:  # its listener runs before the ack
            await slack.acked(await slack.push(stop, retry_attempt=1))
        claude.release()
        await slack_channel(app).drain()
        await app.host.idle()
    assert [e["event"] for e in logs if e["event"].startswith("slack_session_stop")] == [
        "slack_session_stop_duplicate"
    ]
    [stopped, answer] = slack.posts
    assert stopped["text"].startswith("First, list the tasks. Then")
    assert stopped["text"].endswith("(Stopped. Ask again whenever you like.)")
    assert "the tasks are" not in stopped["text"]  # nothing more of the stopped answer
    assert answer["text"] == "Sure: the tasks are A and B."
    assert [entry.role for entry in history] == ["user", "assistant"]
    assert "did not complete (the person stopped it)" in history[1].text
    assert "First, list the tasks" in history[1].text
    assert record.outcome == Outcome.CANCELLED
    assert "did not complete" in str(claude.requests[-1]["messages"])
    assert slack.session_log[-2:] == [(DM, thread, "processing"), (DM, thread, "active")]


async def test_a_stop_with_nothing_running_or_from_outside_the_allowlist_changes_nothing(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("done")
    async with App(make_config(AGENT + f'allowed_user_ids = ["{ALICE}"]\n')) as app:
        first = slack.dm(DM, ALICE, "hello")
        await send(slack, app, first)
        with capture_logs() as logs:
            await send(slack, app, slack.stop_button(DM, first["event"]["ts"], ALICE))
            await send(slack, app, slack.stop_button(DM, first["event"]["ts"], BOB))
    assert [p["text"] for p in slack.posts] == ["done"]
    assert [e["stopped"] for e in logs if e["event"] == "slack_session_stop"] == [False]
    assert any(e["event"] == "slack_event_not_allowed" for e in logs)


async def test_without_the_stop_subscription_one_warning_names_the_fix(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.stop_subscribed = False
    async with App(make_config(AGENT)) as app:
        with capture_logs() as logs:
            await send(slack, app, slack.dm(DM, ALICE, "one"))
            await send(slack, app, slack.dm(DM, ALICE, "two"))
            await slack.wait_for(lambda: len(slack.session_log) == 4)
    warnings = [e for e in logs if e["event"] == "slack_stop_button_missing"]
    assert len(warnings) == 1
    assert "agent_session_stopped" in warnings[0]["fix"]


async def test_an_app_not_declared_an_agent_still_answers_with_the_reaction(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    slack.assistant_view = False
    async with App(make_config(AGENT)) as app:
        body = slack.dm(DM, ALICE, "hello")
        await send(slack, app, body)
        await slack.wait_for(lambda: len(slack.reactions) == 2)
    assert slack.posts[0]["thread_ts"] == body["event"]["ts"]
    assert [r[0] for r in slack.reactions] == ["add", "remove"]


# --- the stop event, pure -----------------------------------------------------------------------


def test_a_stop_event_names_its_session() -> None:
    body = {
        "team_id": TEAM,
        "event_id": "Ev1",
        "event": {
            "type": "agent_session_stopped",
            "channel": "C0123ABC456",
            "thread_ts": "1782234671.392669",
            "user": "U123ABC456",
            "streaming_message_ts": ["1782234987.693923"],
        },
    }
    assert read_stop(body) == Stop("Ev1", TEAM, "C0123ABC456", "1782234671.392669", "U123ABC456")


_VALUE = (
    st.none() | st.integers() | st.text(max_size=12) | st.lists(st.text(max_size=4), max_size=2)
)
_EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["agent_session_stopped", "message"]) | _VALUE},
    optional={"channel": _VALUE, "thread_ts": _VALUE, "user": _VALUE, "team": _VALUE},
)


@given(
    st.fixed_dictionaries(
        {}, optional={"team_id": _VALUE, "event_id": _VALUE, "event": _EVENT | _VALUE}
    )
)
def test_any_stop_body_is_read_or_skipped_never_raises(body: dict[str, Any]) -> None:
    read = read_stop(body)
    assert isinstance(read, Stop | Skip)
    if isinstance(read, Stop):
        assert read.team
        assert read.channel
        assert read.thread_ts


NOW = datetime(2026, 12, 2, tzinfo=UTC)
BOT = events.BotIdentity("UBOT", "BBOT")


@given(st.text(max_size=300))
def test_a_session_title_is_route_side_one_bounded_line(text: str) -> None:
    event = {"type": "message", "channel": DM, "channel_type": "im", "user": ALICE}
    body = {"team_id": TEAM, "event_id": "Ev1", "event": {**event, "text": text, "ts": "1.000100"}}
    message = events.read_event(body, BOT)
    assert not isinstance(message, Skip)
    request = events.pending_request(
        replace(message, session=True), BOT, received_at=NOW, turn_id="t"
    )
    titled = events.with_title(request, assistant.thread_title(request.text))
    assert titled.text == request.text  # the model reads the message, never the title
    assert titled.route is not None
    title = titled.route.values.get(events.TITLE)
    if title is not None:
        assert 0 < len(title) <= assistant.TITLE_MAX_CHARS
        assert title == " ".join(title.split())
        assert all(ch.isprintable() for ch in title)


async def test_the_messages_tab_of_someone_outside_the_allowlist_and_a_bad_stop_do_nothing(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config(AGENT + PROMPTS + f'allowed_user_ids = ["{ALICE}"]\n')
    async with App(config) as app:
        with capture_logs() as logs:
            await send(slack, app, slack.home_opened(DM, BOB))
            bad = slack.stop_button(DM, "1.0", ALICE)
            del bad["event"]["thread_ts"]
            await send(slack, app, bad)
    assert slack.suggested == {}
    assert [e.get("reason") for e in logs if e["event"] == "slack_event_not_allowed"] == [
        "messages tab"
    ]
    assert any("agent_session_stopped without" in str(e.get("reason")) for e in logs)


async def test_a_late_active_of_the_last_turn_never_hides_the_next_turns_stop_button(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    claude.script("one", "two")
    slack.hold("agents.sessions.setStatus")  # the first turn's "processing" is slow to land
    async with App(make_config(AGENT)) as app:
        first = slack.dm(DM, ALICE, "first")
        thread = first["event"]["ts"]
        await slack.acked(await slack.push(first))
        second = slack.dm(DM, ALICE, "second", thread_ts=thread)
        await slack.acked(await slack.push(second))
        # Both turns answered while the session calls wait: the second has begun.
        await slack.wait_for(lambda: slack.held.count("agents.sessions.setStatus") == 2)
        await until(lambda: len(slack.posts) == 2)
        slack.release("agents.sessions.setStatus")
        await app.host.idle()
        await slack.wait_for(lambda: slack.session_log[-1:] == [(DM, thread, "active")])
    statuses = [status for _, _, status in slack.session_log]
    assert statuses == ["processing", "processing", "active"]
