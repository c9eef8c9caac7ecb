"""Telegram files end to end: a PDF in a DM, a captioned photo mentioning the bot in a group, a
voice note, an oversized document; downloaded through getFile and the fake's file server (token
checked), sent to the fake Anthropic API as document and image blocks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.cli.compose import App
from channels.download import within
from tests.attachments import files
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import TOKEN, FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ALICE_ID = 987_654_321_987
GROUP_ID = -1_002_233_445_566
MB = 1024 * 1024


def _content(body: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = body["messages"][-1]["content"]
    return content


async def test_a_pdf_in_a_dm_is_read_as_a_document(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    report = tg.document(files.pdf(3), "report.pdf", "application/pdf")
    claude.script("Three blank pages.")
    async with App(make_config()) as app:
        update = tg.media_message(tg.private_chat(alice), alice, "summarize", document=report)
        await tg.push(update)
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    [request] = claude.requests
    content = _content(request)
    assert [b["type"] for b in content] == ["text", "document"]
    assert "summarize\n\n[attachment 1: report.pdf, PDF, 3 pages, " in content[0]["text"]
    assert answer.text == "Three blank pages."
    assert tg.downloads == ["documents/report.pdf"]
    serialized = json.dumps(claude.requests)
    assert report["file_id"] not in serialized
    assert TOKEN not in serialized


async def test_a_captioned_photo_mentioning_the_bot_in_a_group_starts_a_turn(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Platform team")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    photo = tg.photo(files.jpeg(800, 600), 800, 600)
    claude.script("A red and blue picture.")
    async with App(make_config()) as app:
        # A photo without a mention is only context; the captioned mention is the turn.
        await tg.push(tg.media_message(group, alice, "", photo=tg.photo(files.png(), 64, 48)))
        await tg.push(tg.media_message(group, alice, "what is this?", mention=True, photo=photo))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    [request] = claude.requests
    content = _content(request)
    assert [b["type"] for b in content] == ["text", "image"]
    text = content[0]["text"]
    assert "what is this?\n\n[attachment 1: photo.jpg, JPEG image, 800×600 px, " in text
    assert "[shared photo.jpg]" in text  # the earlier photo, in the preceding messages
    assert answer.reply_to is not None
    assert len(tg.downloads) == 1  # only the largest size of the mentioned photo


async def test_voice_and_oversized_files_get_markers_and_one_line_answers(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    chat = tg.private_chat(alice)
    claude.script("Heard nothing.", "Too big.")
    # Transcription off (tests/channels/telegram/test_voice.py has it on): today's marker.
    async with App(make_config("\n[voice]\nenabled = false\n")) as app:
        await tg.push(tg.media_message(chat, alice, "", voice=tg.voice(b"OggS" * 100, 14)))
        await tg.wait_sent(1)
        big = tg.document(files.big_file(30 * MB), "dump.bin", "application/octet-stream")
        await tg.push(tg.media_message(chat, alice, "and this?", document=big))
        first, second = await tg.wait_sent(2)
        await app.host.idle()
    voice_turn, big_turn = claude.requests
    assert (
        "[attachment 1: voice note, voice or audio message (14 seconds, not transcribed), "
        in _content(voice_turn)[0]["text"]
    )
    assert first.text == "Heard nothing."
    assert "not read: it is larger than the 20.0 MB limit" in _content(big_turn)[0]["text"]
    # The line about the file leads the answer; the rest of the message is still answered.
    assert second.text == (
        "I couldn't read “dump.bin”: it is larger than the 20.0 MB limit.\n\nToo big."
    )
    assert tg.downloads == []  # neither the voice note nor the 30 MB file was downloaded


async def test_a_file_path_that_climbs_out_of_the_file_prefix_is_not_fetched(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    # A file path that, normalized, lands on the Bot API itself (getMe answers with the bot's
    # own account): the download must be refused, not read as a text file.
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    climbing = tg.add_file(b"unused", f"documents/../../../bot{TOKEN}/getMe")
    document = {**climbing, "file_name": "notes.txt", "mime_type": "text/plain"}
    claude.script("No file.")
    async with App(make_config()) as app:
        await tg.push(tg.media_message(tg.private_chat(alice), alice, "read", document=document))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    [request] = claude.requests
    text = _content(request)[0]["text"]
    assert "[attachment 1: notes.txt, text/plain, 6 bytes, not read: the platform refused" in text
    assert '"is_bot"' not in json.dumps(claude.requests)
    assert answer.text.startswith("I couldn't read “notes.txt”: the platform refused")


@pytest.mark.parametrize(
    "path",
    [
        "a/../../x",
        "%2e%2e/%2E%2E/x",
        "a/..%2f..%2fx",
        "docs/../../../botT/getMe",
    ],
)
def test_within_refuses_any_path_that_climbs(path: str) -> None:
    prefix = "http://127.0.0.1:8081/file/botT/"
    assert within(prefix + path, prefix) is None
    assert within(prefix + "documents/a b.pdf", prefix) is not None
    assert within("not a url", prefix) is None
