"""Telegram on an OpenAI-compatible model (`provider = "openai"` and a `base_url` at the fake
Chat Completions server, through the real `openai` SDK): a DM with a photo, a fallback from an
overloaded Anthropic to such a model within one turn, and a long answer streamed from its SSE
chunks as drafts."""

from __future__ import annotations

import pytest

from bot.cli.compose import App
from tests.attachments import files
from tests.channels.slack.test_streaming import long_answer
from tests.channels.telegram.conftest import MakeConfig
from tests.channels.telegram.test_streaming import FAST, answered, expected
from tests.conftest import openai_env
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_987


async def test_a_telegram_dm_with_a_photo_on_an_openai_model(
    tg: FakeTelegram, gpt: FakeOpenAI, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    photo = tg.photo(files.jpeg(800, 600), 800, 600)
    gpt.script("A red and blue picture.")
    async with App(make_config(**openai_env(gpt))) as app:
        await tg.push(tg.media_message(tg.private_chat(alice), alice, "what is this?", photo=photo))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
        [summary] = await app.store.records.recent()
        record = await app.store.records.show(summary.turn_id)
    assert answer.text == "A red and blue picture."
    assert claude.requests == []
    [request] = gpt.requests
    user = request["messages"][-1]
    text, image = user["content"]
    assert "what is this?\n\n[attachment 1: photo.jpg, JPEG image, 800×600 px, " in text["text"]
    assert image["type"] == "image_url"
    assert image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert record is not None
    assert record["request"]["model"] == "qwen3-32b"  # the model that answered


async def test_an_overloaded_anthropic_answers_once_from_the_openai_fallback(
    tg: FakeTelegram, gpt: FakeOpenAI, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.fail(529, times=100)
    gpt.script("From the fallback.")
    local = (
        f'\n[providers.local]\nwire = "openai"\nbase_url = "{gpt.base_url}"\n'
        'api_key_env = "LOCAL_API_KEY"\n'
    )
    config = make_config(
        local, BOT_MODEL__FALLBACKS='["local:qwen3-32b"]', LOCAL_API_KEY="sk-openai-test"
    )
    async with App(config) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "hello?"))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
        [summary] = await app.store.records.recent()
        record = await app.store.records.show(summary.turn_id)
    assert answer.text == "From the fallback."
    assert len(claude.requests) >= 1
    assert len(gpt.requests) == 1
    assert record is not None
    assert record["request"]["model"] == "qwen3-32b"  # the model that answered


async def test_a_long_private_answer_from_an_openai_model_streams_as_drafts(
    tg: FakeTelegram, gpt: FakeOpenAI, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    text = long_answer()
    parts = expected(text)
    gpt.script(text)
    gpt.hold_midway()  # until the first draft shows: then the stream has surely begun
    async with App(make_config(FAST, **openai_env(gpt))) as app:
        await tg.push(tg.message(tg.private_chat(alice), alice, "tell me everything"))
        await tg.wait_for(lambda: tg.drafts)
        gpt.release_midway()
        await answered(tg, app, len(parts))
    assert [sent.text for sent in tg.sent] == parts  # each part once, in order
    assert {draft.chat_id for draft in tg.drafts} == {ALICE_ID}
    [request] = gpt.requests
    assert request["stream"] is True
    assert claude.requests == []
