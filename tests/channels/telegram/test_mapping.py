"""The pure mapping from recorded Telegram updates (payloads/*.json) to decisions."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.turns import Attachment, ConversationKind, PrecedingMessage, Speaker, SurfaceKind
from channels.telegram.mapping import (
    Access,
    BotIdentity,
    Decision,
    Ignore,
    Keep,
    Left,
    StartTurn,
    conversation_key,
    decide,
    dm_surface_id,
)
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT

PAYLOADS = Path(__file__).parent / "payloads"
ME = BotIdentity(id=7000000001, username="host_test_bot")
NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
EVERYBODY = Access()
KEY = b"k" * 32


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def run(name: str, access: Access = EVERYBODY) -> Decision:
    return decide(payload(name), ME, access, turn_id="t1", received_at=NOW, dm_key=KEY)


def turn(name: str, access: Access = EVERYBODY) -> StartTurn:
    decision = run(name, access)
    assert isinstance(decision, StartTurn), decision
    return decision


def test_private_text_is_a_turn_with_speaker_surface_and_hidden_route() -> None:
    request = turn("private_text").request
    assert request.conversation_key == "telegram:311942807"
    assert request.kind is ConversationKind.PUSH
    assert request.channel == "telegram"
    assert request.text == "What's on the agenda today?"
    assert request.speaker == Speaker("Alice Chen", "alice_chen")
    assert request.surface is not None
    assert request.surface.kind is SurfaceKind.DM
    assert request.surface.name == "@alice_chen"
    assert request.surface.id == dm_surface_id(311942807, KEY)  # the chat id is the user id
    assert "311942807" not in request.surface.id
    assert not request.surface.shared
    assert request.surface.message_budget == TELEGRAM_MESSAGE_LIMIT
    assert request.route is not None
    assert request.route.values == {"chat_id": 311942807, "thread_id": None, "reply_to": None}
    assert request.person == "telegram:311942807"
    assert request.preceding == ()
    assert (request.turn_id, request.received_at) == ("t1", NOW)


def test_private_command_is_a_turn_kept_verbatim() -> None:
    request = turn("private_start").request
    assert request.text == "/start"
    assert request.speaker == Speaker("Bruno", None)
    assert request.surface is not None
    assert request.surface.name == "Bruno"  # no @username: the first name names the DM


def test_private_command_addressed_to_the_bot_drops_the_suffix() -> None:
    # Skill commands reach the core in their plain `/name` form, whatever the platform adds.
    assert turn("private_command_addressed").request.text == "/summarize this week"


def test_group_mention_is_a_turn_answered_as_a_reply() -> None:
    request = turn("group_mention").request
    assert request.conversation_key == "telegram:-1002233445566"
    assert request.text == "can you summarise the thread above?"
    assert request.surface is not None
    assert (request.surface.kind, request.surface.name) == (SurfaceKind.GROUP, "Platform team")
    assert request.surface.shared
    assert request.route is not None
    assert request.route.values["reply_to"] == 88211


def test_mention_offsets_count_utf16_units() -> None:
    request = turn("group_mention_after_emoji").request
    assert request.text == "👋🏽 hey @host_test_bot, ping"  # not leading: kept as written


def test_mention_of_a_longer_username_is_not_a_mention() -> None:
    decision = run("group_mention_other")
    assert isinstance(decision, Keep)
    assert decision.reason == "not addressed to the bot"


def test_text_mention_of_the_bot_is_a_turn() -> None:
    assert turn("text_mention").request.text == "Host Bot please look"


def test_reply_to_the_bot_is_a_turn_and_to_a_person_is_not() -> None:
    assert turn("group_reply_to_bot").request.text == "and who owns the fix?"
    assert isinstance(run("group_reply_to_human"), Keep)


def test_command_addressed_to_the_bot_drops_the_suffix() -> None:
    request = turn("group_command").request
    assert request.text == "/summarize the last hour"
    assert request.surface is not None
    assert request.surface.kind is SurfaceKind.GROUP


def test_command_addressed_to_another_bot_is_only_context() -> None:
    assert isinstance(run("group_command_other_bot"), Keep)


def test_plain_group_message_is_kept_as_context() -> None:
    decision = run("group_plain")
    assert decision == Keep(
        "telegram:-4712345678",
        PrecedingMessage(
            at=datetime.fromtimestamp(1735689700, UTC),
            name="Dana Ivers",
            text="the build on main is red again",
            handle="dana_i",
        ),
        "not addressed to the bot",
    )


def test_forum_topic_is_its_own_conversation_and_route() -> None:
    request = turn("forum_topic_mention").request
    assert request.conversation_key == "telegram:-1009988776655:4077"
    assert request.surface is not None
    assert request.surface.id == "-1009988776655"  # the chat, never the topic
    assert request.route is not None
    assert request.route.values == {
        "chat_id": -1009988776655,
        "thread_id": 4077,
        "reply_to": 5120,
        "user_id": 311942807,
    }


def test_topic_started_by_the_bot_does_not_make_every_message_a_reply_to_it() -> None:
    decision = run("forum_topic_plain")
    assert isinstance(decision, Keep)
    assert decision.key == "telegram:-1009988776655:4077"


def test_channel_post_mention_speaks_for_the_channel() -> None:
    request = turn("channel_post_mention").request
    assert request.speaker == Speaker("Dana Ivers")
    assert request.surface is not None
    assert request.surface.kind is SurfaceKind.CHANNEL
    assert request.person == "telegram:chat:-1001122334455"  # it counts against the channel


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("edited_message", "edited message"),
        ("service_new_member", "no text or file (a service message)"),
        ("from_other_bot", "sent by a bot"),
    ],
)
def test_what_starts_nothing(name: str, reason: str) -> None:
    assert run(name) == Ignore(reason)


def test_a_captioned_photo_is_a_turn_with_its_caption_as_text() -> None:
    request = turn("photo_caption").request
    assert request.text == "what is this?"
    assert request.attachments == (Attachment("photo.jpg", "image/jpeg", 1301),)
    # The file id is route-side only: the host asks the channel for "attachment 1".
    assert request.route is not None
    assert request.route.values["files"] == ["AgACAgQAAxkBAAIBNWd"]
    assert "AgACAgQAAxkBAAIBNWd" not in repr(replace(request, route=None))


def test_chat_allowlist() -> None:
    assert run("private_text", Access(chat_ids=frozenset({1}))) == Ignore(
        "chat not in telegram.allowed_chat_ids"
    )
    assert isinstance(run("private_text", Access(chat_ids=frozenset({311942807}))), StartTurn)


def test_user_allowlist() -> None:
    others = Access(user_ids=frozenset({1}))
    assert run("private_text", others) == Ignore("user not in telegram.allowed_user_ids")
    kept = run("group_mention", others)
    assert isinstance(kept, Keep)  # still context for the people who may ask
    assert kept.reason == "user not in telegram.allowed_user_ids"
    assert isinstance(run("group_mention", Access(user_ids=frozenset({311942807}))), StartTurn)


def test_dm_surface_ids_are_stable_distinct_and_keyed() -> None:
    assert dm_surface_id(42, KEY) == dm_surface_id(42, KEY)
    assert dm_surface_id(42, KEY) != dm_surface_id(43, KEY)
    assert dm_surface_id(42, KEY) != dm_surface_id(42, b"other key")
    assert re.fullmatch(r"dm_[0-9a-f]{16}", dm_surface_id(42, KEY))


def test_conversation_keys() -> None:
    assert conversation_key(-100) == "telegram:-100"
    assert conversation_key(-100, 7) == "telegram:-100:7"


@given(
    user_id=st.integers(1, 2**52),
    chat_id=st.integers(-(2**52), -1),
    topic=st.integers(2, 2**31),
    message_id=st.integers(2, 2**31),
    text=st.text(min_size=1),
)
def test_ids_that_direct_the_answer_stay_out_of_what_the_model_sees(
    user_id: int, chat_id: int, topic: int, message_id: int, text: str
) -> None:
    update = {
        "update_id": 1,
        "message": {
            "message_id": message_id,
            "from": {"id": user_id, "is_bot": False, "first_name": "Zed", "username": "zed"},
            "chat": {"id": chat_id, "title": "Room", "type": "supergroup", "is_forum": True},
            "date": 1735689600,
            "message_thread_id": topic,
            "is_topic_message": True,
            "text": f"@host_test_bot {text}",
            "entities": [{"offset": 0, "length": 14, "type": "mention"}],
        },
    }
    decision = decide(update, ME, EVERYBODY, turn_id="t", received_at=NOW, dm_key=KEY)
    if not text.strip():
        return
    assert isinstance(decision, StartTurn)
    request = decision.request
    assert request.speaker is not None
    assert request.surface is not None
    assert request.surface.id == str(chat_id)  # the chat id is model-visible by design
    visible = [request.text, request.speaker.name, request.speaker.handle, request.surface.name]
    for hidden in (str(user_id), str(topic), str(message_id)):
        if hidden not in text:
            assert not any(hidden in str(value) for value in visible)
    assert request.person == f"telegram:{user_id}"
    assert request.route is not None
    assert request.route.values == {
        "chat_id": chat_id,
        "thread_id": topic,
        "reply_to": message_id,
        "user_id": user_id,  # route-side only: whom a reply meant for them alone goes to
    }


@given(user_id=st.integers(10**6, 2**52), text=st.text(min_size=1))
def test_a_private_chat_never_shows_the_user_id(user_id: int, text: str) -> None:
    update = {
        "update_id": 1,
        "message": {
            "message_id": 9,
            "from": {"id": user_id, "is_bot": False, "first_name": "Zed", "username": "zed"},
            "chat": {"id": user_id, "first_name": "Zed", "username": "zed", "type": "private"},
            "date": 1735689600,
            "text": text,
        },
    }
    decision = decide(update, ME, EVERYBODY, turn_id="t", received_at=NOW, dm_key=KEY)
    if not text.strip():
        assert isinstance(decision, Ignore)
        return
    assert isinstance(decision, StartTurn)
    request = decision.request
    assert request.speaker is not None
    assert request.surface is not None
    visible = [
        request.speaker.name,
        request.speaker.handle,
        request.surface.name,
        request.surface.id,
    ]
    assert not any(str(user_id) in str(value) for value in visible)
    assert request.person == f"telegram:{user_id}"


def test_a_member_leaving_a_group_is_a_departure() -> None:
    update = {
        "update_id": 9,
        "message": {
            "message_id": 77,
            "date": 1_740_000_000,
            "chat": {"id": -100200, "type": "supergroup", "title": "Team"},
            "from": {"id": 555, "is_bot": False, "first_name": "Alice"},
            "left_chat_member": {"id": 555, "is_bot": False, "first_name": "Alice"},
        },
    }
    decision = decide(update, ME, EVERYBODY, turn_id="t1", received_at=NOW, dm_key=KEY)
    assert decision == Left("telegram:555", "-100200", NOW)
    update["message"]["left_chat_member"] = {"id": 1, "is_bot": True, "first_name": "B"}
    again = decide(update, ME, EVERYBODY, turn_id="t2", received_at=NOW, dm_key=KEY)
    assert isinstance(again, Ignore)
