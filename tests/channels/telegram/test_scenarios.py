"""Telegram end to end: the whole App (store, host, model runtime, HTTP port, Telegram channel)
with python-telegram-bot polling the fake Bot API and the model behind the fake Anthropic API.

"No answer" is never awaited as silence: each such test sends a later message that must be
answered, and then counts what was sent.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from bot.cli.compose import App
from bot.errors import ConfigError
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT, utf16_length
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram, parse_html

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_987
DANA_ID = 876_543_219_876
GROUP_ID = -1_002_233_445_566


def last_user_message(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"][-1], ensure_ascii=False)


async def test_dm_gets_an_answer(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.script("**Hello** Alice & co <3")
    async with App(make_config()) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "hi there"))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
        history = await app.store.history.load(f"telegram:{ALICE_ID}")
    assert (answer.chat_id, answer.reply_to, answer.parse_mode) == (ALICE_ID, None, "HTML")
    assert answer.text == "<b>Hello</b> Alice &amp; co &lt;3"
    assert [entry.text for entry in history] == ["hi there", "**Hello** Alice & co <3"]
    assert "Alice Chen (@alice)" in last_user_message(claude.requests[0])


async def test_group_chatter_is_kept_and_becomes_the_next_mentions_context(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    dana = tg.user("Dana", "Ivers", "dana_i", user_id=DANA_ID)
    claude.script("first answer", "second answer")
    async with App(make_config()) as app:
        await tg.push(tg.message(group, dana, "the deploy on main is red again"))
        await tg.push(tg.message(group, alice, "I saw it fail on the migration step"))
        mention = tg.message(group, alice, "what is going on?", mention=True)
        await tg.push(mention)
        [answer] = await tg.wait_sent(1)
        await tg.push(tg.message(group, dana, "what next?", mention=True))
        await tg.wait_sent(2)
        await app.host.idle()
    assert len(claude.requests) == 2  # the chatter started no turn of its own
    assert answer.reply_to == mention["message"]["message_id"]
    first = last_user_message(claude.requests[0])
    assert "the deploy on main is red again" in first
    assert "Dana Ivers (@dana_i)" in first
    assert "I saw it fail on the migration step" in first
    # Taken once: the next turn's context starts after the previous turn.
    assert "the deploy on main is red again" not in last_user_message(claude.requests[1])


async def test_a_reply_to_the_bot_is_answered(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.group(-4712345678, "Release crew")
    alice = tg.user("Alice", "Chen", "alice")
    claude.script("it is the migration", "Dana owns it")
    async with App(make_config()) as app:
        await tg.push(tg.message(group, alice, "why is it red?", mention=True))
        [first] = await tg.wait_sent(1)
        follow_up = tg.message(group, alice, "who owns the fix?", reply_to=tg.bot_message(first))
        await tg.push(follow_up)
        second = (await tg.wait_sent(2))[1]
        await app.host.idle()
    assert second.plain == "Dana owns it"
    assert second.reply_to == follow_up["message"]["message_id"]
    assert "who owns the fix?" in last_user_message(claude.requests[1])


async def test_a_forum_topic_is_its_own_conversation(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    forum = tg.supergroup(-1009988776655, "Engineering HQ", forum=True)
    alice = tg.user("Alice", "Chen", "alice")
    claude.script("topic answer", "general answer")
    async with App(make_config()) as app:
        await tg.push(tg.message(forum, alice, "chatter inside the topic", topic=77))
        await tg.push(tg.message(forum, alice, "status?", mention=True, topic=77))
        await tg.wait_sent(1)
        await tg.push(tg.message(forum, alice, "and here?", mention=True))
        in_topic, in_general = await tg.wait_sent(2)
        await app.host.idle()
        keys = await app.store.history.conversations()
    assert (in_topic.thread_id, in_general.thread_id) == (77, None)
    assert {"telegram:-1009988776655:77", "telegram:-1009988776655"} <= set(keys)
    assert "chatter inside the topic" in last_user_message(claude.requests[0])
    general = json.dumps(claude.requests[1]["messages"])
    assert "chatter inside the topic" not in general
    assert "status?" not in general  # no history shared with the topic


async def test_a_long_answer_full_of_emoji_and_markup_arrives_in_accepted_parts(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    block = (
        "## Step 🚀\n\nSome **bold 🎉** and _italic_ text, `code <x>` & a "
        "[link](https://example.com/?a=1&b=2) 😀😀😀.\n\n"
        "```python\nprint('🐍' if a < b else '🦀')\n```\n\n- one 🍎\n- two 🍐\n\n"
    )
    answer = (block * 60)[:10_000]
    alice = tg.user("Alice")
    claude.script(answer)
    async with App(make_config()) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "write a lot"))
        await tg.wait_for(lambda: bool(tg.sent) and "🐍" in tg.sent[-1].plain)
        await app.host.idle()
    assert len(tg.sent) >= 3
    for part in tg.sent:
        assert utf16_length(part.text) <= TELEGRAM_MESSAGE_LIMIT
        assert part.parse_mode == "HTML"
        assert parse_html(part.text) == part.plain
    read = "".join(part.plain for part in tg.sent)
    assert read.count("🚀") == answer.count("🚀")
    assert read.count("🐍") == answer.count("🐍")


async def test_an_entity_error_resends_the_part_as_plain_text(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice")
    claude.script("**bold** answer")
    tg.entity_error()
    async with App(make_config()) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "hi"))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    assert (answer.text, answer.parse_mode) == ("bold answer", None)


async def test_flood_control_waits_and_continues(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice")
    claude.script("after the wait")
    tg.rate_limit(1)
    async with App(make_config()) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "hi"))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    assert answer.plain == "after the wait"
    assert [c.method for c in tg.calls].count("sendMessage") == 2


async def test_a_restart_with_unconfirmed_updates_answers_nothing_twice(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    config = make_config()
    alice = tg.user("Alice")
    chat = tg.private_chat(alice)
    claude.script("answer one", "answer two")
    tg.freeze_confirmations()  # the process dies before Telegram hears what it handled
    async with App(config) as app:
        first = await tg.push(tg.message(chat, alice, "one"))
        await tg.wait_sent(1)
        await app.host.idle()
    assert first in tg.pending_updates
    tg.freeze_confirmations(False)
    async with App(config) as app:
        await tg.push(tg.message(chat, alice, "two"))
        await tg.wait_for(lambda: any(s.plain == "answer two" for s in tg.sent))
        await app.host.idle()
    assert [s.plain for s in tg.sent] == ["answer one", "answer two"]
    assert len(claude.requests) == 2
    assert tg.pending_updates == []


async def test_ids_that_route_the_answer_never_reach_the_model(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    forum = tg.supergroup(GROUP_ID, "Platform team", forum=True)
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    dana = tg.user("Dana", "Ivers", "dana_i", user_id=DANA_ID)
    in_group = tg.message(forum, alice, "summarise please", mention=True, topic=31_337_313)
    in_group["message"]["message_id"] = 42_424_242
    chatter = tg.message(forum, dana, "context from Dana", topic=31_337_313)
    async with App(make_config()) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "hello in private"))
        await tg.push(chatter)
        await tg.push(in_group)
        sent = await tg.wait_sent(2)
        await app.host.idle()
        summaries = await app.store.records.recent()
        records = [await app.store.records.show(summary.turn_id) for summary in summaries]
    assert {s.chat_id for s in sent} == {ALICE_ID, GROUP_ID}
    stored = [record["request"] for record in records if record is not None]
    assert len(stored) == len(claude.requests) == 2
    seen = json.dumps(claude.requests) + json.dumps(stored, default=str)
    assert "context from Dana" in seen  # the requests are really in there
    assert "hello in private" in seen
    for hidden in (ALICE_ID, DANA_ID, 31_337_313, 42_424_242, tg.token):
        assert str(hidden) not in seen


async def test_typing_shows_while_the_model_works(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice")
    claude.stall(0.3)
    async with App(make_config()) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "think hard"))
        await tg.wait_sent(1)
        await app.host.idle()
    typing = [c for c in tg.actions if c.params["action"] == "typing"]
    assert typing
    assert typing[0].params["chat_id"] == str(alice["id"])


async def test_allowlists_keep_strangers_out(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", user_id=ALICE_ID)
    mallory = tg.user("Mallory", user_id=555_000_555)
    claude.script("for alice")
    async with App(make_config(f"allowed_user_ids = [{ALICE_ID}]\n")) as app:
        await tg.push(tg.message(tg.private_chat(mallory), mallory, "let me in"))
        await tg.push(tg.message(tg.private_chat(alice), alice, "hello"))
        await tg.wait_sent(1)
        await app.host.idle()
    assert [(s.chat_id, s.plain) for s in tg.sent] == [(ALICE_ID, "for alice")]
    assert len(claude.requests) == 1


# --- webhook mode -------------------------------------------------------------------------------

SECRET = "s3cret-token_for-tests"


def webhook_config(make_config: MakeConfig, extra: str = "", **env: str) -> Any:
    return make_config(
        'mode = "webhook"\n' + extra,
        BOT_HTTP__ENABLED="true",
        BOT_HTTP__PORT="0",
        **env,
    )


async def test_webhook_with_a_wrong_secret_is_refused_and_starts_nothing(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice")
    chat = tg.private_chat(alice)
    claude.script("via webhook")
    config = webhook_config(
        make_config, 'webhook_url = "https://bot.example/telegram/webhook"\n',
        TELEGRAM_WEBHOOK_SECRET=SECRET,
    )  # fmt: skip
    async with App(config) as app:
        set_webhook = next(c for c in tg.calls if c.method == "setWebhook")
        assert set_webhook.params["url"] == "https://bot.example/telegram/webhook"
        assert set_webhook.params["secret_token"] == SECRET
        local = f"http://127.0.0.1:{app.http_port}/telegram/webhook"
        tg.webhook = {"url": local, "secret_token": "not-the-secret"}
        await tg.push(tg.message(chat, alice, "forged"))
        async with aiohttp.ClientSession() as session, session.post(local, json={}) as response:
            missing = response.status
        tg.webhook = {"url": local, "secret_token": SECRET}
        await tg.push(tg.message(chat, alice, "genuine"))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    assert tg.webhook_statuses == [401, 200]
    assert missing == 401
    assert answer.plain == "via webhook"
    assert len(claude.requests) == 1
    assert "genuine" in last_user_message(claude.requests[0])
    assert "getUpdates" not in {c.method for c in tg.calls}


async def test_webhook_mode_needs_its_secret(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_WEBHOOK_SECRET"):
        async with App(webhook_config(make_config)):
            pass
