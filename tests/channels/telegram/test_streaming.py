"""Telegram streaming end to end (issue 15): the whole App, python-telegram-bot against the fake
Bot API, the model behind the fake Anthropic API writing its answer slowly (`claude.pace`).

What a person finally sees must be exactly the non-streamed render (HTML, split within 4,096
UTF-16 units after formatting), in order, each part once: drafts while it is written in a private
chat, one edited message at a time in a group (replying to the mention).
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bot.cli.compose import App
from channels.telegram.format import to_telegram_html
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT, split_html, utf16_length
from tests.channels.slack.test_streaming import long_answer
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram, parse_html

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_987
GROUP_ID = -1_002_233_445_566
FAST = "stream_interval = 0\ngroup_stream_interval = 0\n"


def expected(text: str) -> list[str]:
    return split_html(to_telegram_html(text), TELEGRAM_MESSAGE_LIMIT)


def methods(tg: FakeTelegram) -> list[str]:
    return [call.method for call in tg.calls if call.method != "getUpdates"]


async def answered(tg: FakeTelegram, app: App, count: int) -> None:
    await tg.wait_sent(count)
    await app.host.idle()


async def test_a_long_private_answer_streams_as_drafts_and_ends_as_the_split_render(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    text = long_answer()
    parts = expected(text)
    claude.script(text)
    claude.pace, claude.words_per_delta = 0.002, 30
    claude.hold_midway()  # until the first draft shows: then the stream has surely begun
    async with App(make_config(FAST)) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "tell me everything"))
        await tg.wait_for(lambda: tg.drafts)
        claude.release_midway()
        await answered(tg, app, len(parts))
    assert len(parts) >= 2
    assert [sent.text for sent in tg.sent] == parts
    assert all(utf16_length(parse_html(part)) <= TELEGRAM_MESSAGE_LIMIT for part in parts)
    assert tg.drafts  # it showed while it was written
    assert {draft.chat_id for draft in tg.drafts} == {ALICE_ID}
    assert methods(tg).count("sendMessage") == len(parts)  # each part sent once
    assert not tg.deleted


async def test_a_group_answer_streams_as_one_edited_message_replying_to_the_mention(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    text = long_answer()
    parts = expected(text)
    claude.script(text)
    claude.pace, claude.words_per_delta = 0.002, 30
    claude.hold_midway()  # until the first message shows: then the stream has surely begun
    async with App(make_config(FAST)) as app:
        mention = tg.message(group, alice, "tell me everything", mention=True)
        await tg.push(mention)
        await tg.wait_sent(1)
        claude.release_midway()
        await answered(tg, app, len(parts))
    assert [sent.text for sent in tg.sent] == parts
    assert tg.sent[0].reply_to == mention["message"]["message_id"]
    assert not tg.drafts  # drafts are for private chats
    used = methods(tg)
    assert "editMessageText" in used
    assert used.count("sendMessage") == len(parts)


@pytest.mark.parametrize("refusal", ["404", "400"])
async def test_refused_drafts_fall_back_to_a_normal_send_with_one_warning(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig, refusal: str
) -> None:
    if refusal == "404":  # a Bot API without the method
        tg.drafts_enabled = False
    else:  # what Telegram answers where this bot or chat may not have drafts
        description = "Bad Request: TEXTDRAFT_PEER_INVALID"
        tg.fail("sendMessageDraft", status=400, description=description, times=100)
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.script("First **answer**.", "Second answer.")
    claude.words_per_delta = 1
    claude.hold_midway()  # the first answer surely tries a draft before it is done
    with capture_logs() as logs:
        async with App(make_config(FAST)) as app:
            chat = tg.private_chat(alice)
            await tg.push(tg.message(chat, alice, "one"))
            await tg.wait_for(lambda: "sendMessageDraft" in methods(tg))
            claude.release_midway()
            await answered(tg, app, 1)
            await tg.push(tg.message(chat, alice, "two"))
            await answered(tg, app, 2)
    assert [sent.plain for sent in tg.sent] == ["First answer.", "Second answer."]
    assert methods(tg).count("sendMessageDraft") == 1  # refused once, edits from then on
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in warnings] == ["telegram_drafts_refused"]
    assert "Fix:" in warnings[0]["reason"]


async def test_off_mode_sends_whole_answers_only(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    text = long_answer()
    claude.script(text)
    claude.pace, claude.words_per_delta = 0.002, 30
    async with App(make_config('stream = "off"\n')) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "whole please"))
        await answered(tg, app, len(expected(text)))
    assert [sent.text for sent in tg.sent] == expected(text)
    assert set(methods(tg)) <= {
        "getMe",
        "deleteWebhook",
        "setMyCommands",
        "sendMessage",
        "sendChatAction",
    }


async def test_a_turn_that_fails_mid_stream_leaves_one_apology_and_removes_the_rest(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    """The stream showed several messages of an answer the model never finished: the first
    message becomes the apology, the others are removed (no partial answer is left behind)."""
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.pace, claude.words_per_delta = 0.002, 30
    claude.fail_midstream("overloaded_error", partial=long_answer())
    async with App(make_config(FAST)) as app:
        await tg.push(tg.message(group, alice, "tell me everything", mention=True))
        await tg.wait_for(lambda: len(tg.deleted) >= 1)
        await app.host.idle()
    [apology] = tg.sent
    assert apology.plain.startswith("Sorry, I couldn't answer")
    assert apology.reply_to is not None  # the first message, replying to the mention
    assert all(d.chat_id == GROUP_ID for d in tg.deleted)


async def test_an_answer_shown_as_drafts_is_sent_as_a_message_even_when_sending_fails_a_while(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    """The person saw only a draft: the answer must still become a real message, tried again
    in-process past the deliverer's own retries, without waiting for a restart."""
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    text = "A **short** private answer."
    claude.script(text)
    claude.words_per_delta = 2
    claude.hold_midway()
    tg.fail("sendMessage", status=502, description="Bad Gateway", times=4)
    async with App(make_config(FAST)) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "hi"))
        await tg.wait_for(lambda: tg.drafts)
        claude.release_midway()
        await answered(tg, app, 1)
    assert [sent.text for sent in tg.sent] == expected(text)
    assert methods(tg).count("sendMessage") == 5  # four refused (the fake's), then sent
