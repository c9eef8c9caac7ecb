"""The pure mapping from recorded Slack payloads to turn facts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.ports.memory import Departure
from bot.turns import ConversationKind, Speaker, SurfaceKind
from channels.slack import events, names
from channels.slack.events import BotIdentity, Skip, SlackMessage
from channels.slack.split import MESSAGE_BUDGET

PAYLOADS = Path(__file__).parent / "payloads"
BOT = BotIdentity(user_id="U0LAN0Z89", bot_id="B0LAN0Z89")


def payload(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    return loaded


def read(name: str, **options: Any) -> SlackMessage | Skip:
    return events.read_event(payload(name), BOT, **options)


def message(name: str) -> SlackMessage:
    found = read(name)
    assert isinstance(found, SlackMessage), found
    return found


def test_a_channel_mention_starts_a_thread_conversation_under_it() -> None:
    mention = message("app_mention_channel")
    assert mention.event_id == "Ev0LAN670R"
    assert events.conversation_key(mention) == "slack:T061EG9R6:C0LAN2Q65:1515449522.000016"
    assert events.reply_thread(mention) == "1515449522.000016"


def test_a_mention_inside_a_thread_continues_that_thread() -> None:
    mention = message("app_mention_thread")
    assert events.conversation_key(mention) == "slack:T061EG9R6:C0LAN2Q65:1515449522.000016"
    assert events.reply_thread(mention) == "1515449522.000016"
    assert mention.in_thread


def test_a_dm_top_level_is_one_conversation_answered_at_top_level() -> None:
    dm = message("message_im")
    assert events.conversation_key(dm) == "slack:T061EG9R6:D0PNCRP9N"
    assert events.reply_thread(dm) is None


def test_a_dm_thread_is_its_own_conversation() -> None:
    dm = message("message_im_thread")
    assert events.conversation_key(dm) == "slack:T061EG9R6:D0PNCRP9N:1700000123.456789"
    assert events.reply_thread(dm) == "1700000123.456789"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("message_channel_plain", "channel message without a mention"),
        ("message_changed", "not a new message: subtype 'message_changed'"),
        ("message_deleted", "not a new message: subtype 'message_deleted'"),
        ("channel_join", "not a new message: subtype 'channel_join'"),
        ("own_message_im", "own message"),
        ("bot_message_im", "another bot"),
        ("slackbot_reminder_im", "Slackbot"),
    ],
)
def test_events_that_start_no_turn(name: str, reason: str) -> None:
    assert read(name) == Skip(reason)


def test_other_bots_may_be_let_in() -> None:
    found = read("bot_message_im", ignore_other_bots=False)
    assert isinstance(found, SlackMessage)
    assert found.bot_name == "Deploy Bot"


def test_slackbot_starts_nothing_even_when_other_bots_are_let_in() -> None:
    assert read("slackbot_reminder_im", ignore_other_bots=False) == Skip("Slackbot")


def test_the_own_bot_is_never_let_in() -> None:
    assert read("own_message_im", ignore_other_bots=False) == Skip("own message")


def test_an_edited_mention_starts_nothing() -> None:
    body = payload("app_mention_channel")
    body["event"]["edited"] = {"user": "U061F7AUR", "ts": "1515449530.000000"}
    assert events.read_event(body, BOT) == Skip("not a new message: edited")


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda body: body.pop("event"), "malformed: no event object"),
        (lambda body: body["event"].pop("channel"), "malformed: missing channel"),
        (
            lambda body: body["event"].update(ts="yesterday"),
            "malformed: ts 'yesterday' is not a Slack timestamp",
        ),
        (lambda body: body["event"].pop("user"), "malformed: missing user"),
        (
            lambda body: body.pop("team_id") and body["event"].pop("team"),
            "malformed: missing team_id",
        ),
        (lambda body: body["event"].update(type="reaction_added"), None),
    ],
)
def test_malformed_events_are_skipped_with_a_reason(mutate: Any, reason: str | None) -> None:
    body = payload("app_mention_channel")
    mutate(body)
    found = events.read_event(body, BOT)
    assert isinstance(found, Skip)
    if reason:
        assert found.reason == reason


def test_the_same_message_as_message_and_app_mention_shares_one_message_key() -> None:
    as_mention = message("message_im")
    body = payload("message_im")
    body["event"]["type"] = "app_mention"
    body["event_id"] = "Ev0DIFFERENT"
    as_message = events.read_event(body, BOT)
    assert isinstance(as_message, SlackMessage)
    assert as_mention.event_id != as_message.event_id
    assert events.message_key(as_mention) == events.message_key(as_message)


def test_route_and_person_hold_the_hidden_ids() -> None:
    mention = message("app_mention_thread")
    route = events.route_for(mention)
    assert route.platform == "slack"
    assert route.values == {
        "team": "T061EG9R6",
        "channel": "C0LAN2Q65",
        "thread_ts": "1515449522.000016",
        "message_ts": "1515449600.000200",
        "user": "U061F7AUR",
    }
    assert events.person_for(mention) == "slack:T061EG9R6:U061F7AUR"


def test_build_request_carries_facts_and_keeps_ids_route_side() -> None:
    mention = message("app_mention_thread")
    surface = names.build_surface("C0LAN2Q65", SurfaceKind.CHANNEL, {"name": "rivers"}, None)
    request = events.build_request(
        mention,
        text="and what about <tributaries> & lakes?",
        speaker=Speaker("Alice Chen", "alice"),
        surface=surface,
        preceding=(),
        received_at=datetime(2024, 1, 1, tzinfo=UTC),
        turn_id="t1",
    )
    assert request.kind is ConversationKind.PUSH
    assert request.channel == "slack"
    assert request.surface is not None
    assert request.surface.message_budget == MESSAGE_BUDGET
    visible = repr((request.text, request.speaker, request.surface, request.preceding))
    for hidden in ("U061F7AUR", "1515449522.000016", "1515449600.000200"):
        assert hidden not in visible


def test_speaker_from_a_recorded_users_info() -> None:
    user = payload("users_info")["user"]
    assert names.speaker_from_user(user) == Speaker(name="Alice Chen", handle="alice")


def test_speaker_without_display_name_uses_the_username() -> None:
    user = payload("users_info")["user"]
    user["profile"]["display_name"] = ""
    assert names.speaker_from_user(user) == Speaker(name="Alice Chen", handle="alice.chen")


def test_an_unknown_speaker_is_someone_never_an_id() -> None:
    assert names.speaker_from_user(None) == Speaker(name="someone")


@pytest.mark.parametrize(
    ("info", "channel_type", "channel_id", "kind"),
    [
        ("conversations_info_channel", None, "C0LAN2Q65", SurfaceKind.CHANNEL),
        ("conversations_info_im", None, "D0PNCRP9N", SurfaceKind.DM),
        ("conversations_info_mpim", None, "G0AB12CD3", SurfaceKind.GROUP),
        # conversations.info wins over what the event says
        ("conversations_info_mpim", "channel", "C0AB12CD3", SurfaceKind.GROUP),
        (None, "im", "C0FAKE", SurfaceKind.DM),
        (None, "mpim", "C0FAKE", SurfaceKind.GROUP),
        (None, "group", "G0PRIV", SurfaceKind.CHANNEL),
        (None, None, "D0PNCRP9N", SurfaceKind.DM),
        (None, None, "G0AB12CD3", SurfaceKind.GROUP),
        (None, None, "C0LAN2Q65", SurfaceKind.CHANNEL),
    ],
)
def test_surface_kind_order_of_authority(
    info: str | None, channel_type: str | None, channel_id: str, kind: SurfaceKind
) -> None:
    channel = payload(info)["channel"] if info else None
    assert names.surface_kind(channel, channel_type, channel_id) is kind


def test_surface_names() -> None:
    info = payload("conversations_info_channel")["channel"]
    channel = names.build_surface("C0LAN2Q65", SurfaceKind.CHANNEL, info, "alice")
    assert (channel.name, channel.shared) == ("rivers", True)
    dm = names.build_surface("D0PNCRP9N", SurfaceKind.DM, None, "alice")
    assert (dm.name, dm.shared) == ("alice", False)
    unreadable = names.build_surface("C0LAN2Q65", SurfaceKind.CHANNEL, None, "alice")
    assert (unreadable.kind, unreadable.id, unreadable.name) == ("channel", "C0LAN2Q65", None)


def test_plain_text_strips_the_bot_and_resolves_people() -> None:
    mention = message("app_mention_channel")
    text = names.plain_text(mention.text, {"U0G9QF9C6": "bob"}, strip_user=BOT.user_id)
    assert text == "is it everything a river should be? ask @bob too"


def test_plain_text_never_shows_an_unresolved_user_id() -> None:
    text = names.plain_text("ping <@U0G9QF9C6> and <@U0LAN0Z89>", {})
    assert text == "ping @someone and @someone"


@pytest.mark.parametrize(
    ("markup", "plain"),
    [
        ("&lt;tag&gt; &amp;amp;", "<tag> &amp;"),
        (
            "see <https://example.com/runbook|the runbook>",
            "see the runbook (https://example.com/runbook)",
        ),
        ("see <https://example.com>", "see https://example.com"),
        ("mail <mailto:a@example.com|a@example.com>", "mail a@example.com (mailto:a@example.com)"),
        ("in <#C0LAN2Q65|rivers> and <#C0OTHER>", "in #rivers and #C0OTHER"),
        ("<!here> <!channel> <!everyone>", "@here @channel @everyone"),
        ("<!subteam^S0123|@platform> look", "@platform look"),
        ("at <!date^1392734382^{date_pretty}|Feb 18, 2014>", "at Feb 18, 2014"),
        ("named <@U0G9QF9C6|bob>", "named @bob"),
    ],
)
def test_plain_text_markup(markup: str, plain: str) -> None:
    assert names.plain_text(markup, {}) == plain


def test_mentioned_users() -> None:
    mention = message("app_mention_channel")
    assert names.mentioned_users(mention.text) == {"U0LAN0Z89", "U0G9QF9C6"}


def test_preceding_starts_after_the_bots_last_answer_and_skips_joins_and_the_trigger() -> None:
    trigger = message("app_mention_thread")
    replies = payload("conversations_replies")["messages"]
    selected = events.select_preceding(replies, trigger.ts, BOT)
    assert [item["ts"] for item in selected] == ["1515449540.000110", "1515449550.000120"]


def test_preceding_stops_at_an_earlier_mention_of_the_bot() -> None:
    trigger = message("app_mention_thread")
    replies = [m for m in payload("conversations_replies")["messages"] if "bot_id" not in m]
    selected = events.select_preceding(replies, trigger.ts, BOT)
    # The thread root mentioned the bot: it was a turn of its own, so only what came after counts.
    assert [item["ts"] for item in selected] == ["1515449540.000110", "1515449550.000120"]


def test_preceding_is_bounded_to_the_newest_thirty() -> None:
    trigger = message("app_mention_channel")
    chatter = [
        {"type": "message", "user": "U0G9QF9C6", "text": f"m{i}", "ts": f"{1515440000 + i}.000001"}
        for i in range(45)
    ]
    selected = events.select_preceding(reversed(chatter), trigger.ts, BOT)
    assert len(selected) == events.MAX_PRECEDING
    assert selected[0]["text"] == "m15"
    assert selected[-1]["text"] == "m44"


def test_preceding_message_from_a_recorded_reply() -> None:
    item = payload("conversations_replies")["messages"][2]
    found = events.preceding_message(item, Speaker("Bob Stone", "bob"), "I disagree")
    assert found.at == datetime.fromtimestamp(1515449540.000110, tz=UTC)
    assert (found.name, found.handle, found.text) == ("Bob Stone", "bob", "I disagree")


USER_ID = st.from_regex(r"U[A-Z0-9]{8,10}", fullmatch=True)
TS = st.builds(
    lambda s, u: f"{s}.{u:06d}", st.integers(1_400_000_000, 1_900_000_000), st.integers(0, 999_999)
)
WORDS = st.text(alphabet="abcdefghij <>|&@#!:/.\n", max_size=80)


@settings(max_examples=200, deadline=None)
@given(
    speaker=USER_ID,
    others=st.lists(USER_ID, max_size=3),
    words=st.lists(WORDS, min_size=1, max_size=4),
    ts=TS,
    thread=st.one_of(st.none(), TS),
    dm=st.booleans(),
)
def test_no_user_id_or_timestamp_reaches_what_the_model_sees(
    speaker: str, others: list[str], words: list[str], ts: str, thread: str | None, dm: bool
) -> None:
    mentions = [f"<@{user}>" for user in [BOT.user_id, speaker, *others]]
    text = " ".join(w for pair in zip(words, mentions, strict=False) for w in pair)
    body = payload("message_im" if dm else "app_mention_channel")
    body["event"].update(user=speaker, text=text, ts=ts)
    if thread:
        body["event"]["thread_ts"] = thread
    found = events.read_event(body, BOT)
    assert isinstance(found, SlackMessage)
    handles = {user: f"person{i}" for i, user in enumerate(others[:1])}
    surface = names.build_surface(found.channel, SurfaceKind.CHANNEL, None, "alice")
    preceding = events.preceding_message({"ts": ts}, Speaker("Bob"), names.plain_text(text, {}))
    request = events.build_request(
        found,
        text=names.plain_text(found.text, handles, BOT.user_id),
        speaker=Speaker("Alice Chen", "alice"),
        surface=surface,
        preceding=(preceding,),
        received_at=datetime(2024, 1, 1, tzinfo=UTC),
        turn_id="t",
    )
    shown = repr((request.text, request.speaker, request.surface, request.preceding))
    for hidden in {speaker, *others, str(BOT.user_id), ts, *([thread] if thread else [])}:
        assert hidden not in shown
    assert request.person is not None
    assert speaker in request.person


def test_member_left_channel_is_a_departure() -> None:
    body = {
        "team_id": "T1",
        "event_time": 1_740_000_000,
        "event": {"type": "member_left_channel", "user": "U1", "channel": "C1", "team": "T1"},
    }
    now = datetime(2025, 3, 1, tzinfo=UTC)
    assert events.read_departure(body, now) == Departure("slack", "C1", "slack:T1:U1", now)
    body["event"] = {**body["event"], "user": None}  # type: ignore[dict-item]
    assert isinstance(events.read_departure(body, now), events.Skip)
    assert isinstance(events.read_departure({"event": {"type": "message"}}, now), events.Skip)


_KINDS = {
    "person": {"user": "U0PERSON1", "text": "news"},
    "mention": {"user": "U0PERSON1", "text": f"<@{BOT.user_id}> and you?"},
    "own": {"user": BOT.user_id, "bot_id": BOT.bot_id, "text": "an answer"},
    "join": {"user": "U0PERSON2", "text": "joined", "subtype": "channel_join"},
}


@settings(max_examples=200)
@given(
    kinds=st.lists(st.sampled_from(sorted(_KINDS)), min_size=2, max_size=40),
    cuts=st.tuples(st.integers(0, 40), st.integers(0, 40)),
)
def test_reading_from_the_last_turn_selects_what_reading_everything_does(
    kinds: list[str], cuts: tuple[int, int]
) -> None:
    """The directory reads a thread from the bot's last turn an earlier read found: what it
    selects then is what the whole thread gives."""
    messages = [{"ts": f"{1000 + i}.000100", **_KINDS[kind]} for i, kind in enumerate(kinds)]
    earlier, later = sorted(min(cut, len(messages) - 1) for cut in cuts)
    first_trigger, trigger = messages[earlier]["ts"], messages[later]["ts"]
    since = events.last_turn(messages, first_trigger, BOT)
    whole = events.select_preceding(messages, trigger, BOT)
    if since is None:
        return
    assert float(since) < float(first_trigger)
    tail = [m for m in messages if float(m["ts"]) > float(since)]
    assert events.select_preceding(tail, trigger, BOT) == whole
