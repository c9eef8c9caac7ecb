"""Telegram voice notes transcribed on this machine, end to end: a real spoken clip sent to the
fake Bot API, downloaded through getFile, transcribed by faster-whisper with the bundled model,
and the words found in the request the fake Anthropic API recorded; never the audio, never the
file id. A voice note alone in a group starts no turn; a 20-minute recording and a damaged file
each get their one-line answer while the rest of the message is answered."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from bot.cli.compose import App
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.voice.clips import clip, require_voice, tone_wav, video_note

pytestmark = [
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
    pytest.mark.slow,
]

ALICE_ID = 987_654_321_987
GROUP_ID = -1_002_233_445_566


@pytest.fixture(autouse=True)
def _voice() -> None:
    require_voice()


def _content(body: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = body["messages"][-1]["content"]
    return content


async def test_a_dm_voice_note_is_answered_from_what_was_said(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    chat = tg.private_chat(alice)
    voice = tg.voice(clip("tomatoes.ogg"), 4)
    claude.script("I'll remind you on Tuesday.", "You asked about the plants.")
    async with App(make_config()) as app:
        await tg.push(tg.media_message(chat, alice, "", voice=voice))
        await tg.wait_sent(1)
        await tg.push(tg.message(chat, alice, "what did I ask?"))
        first, second = await tg.wait_sent(2)
        await app.host.idle()  # memory capture, in the background, has finished too
        captured = await app.store.memory.search("remind")
        heard = await app.store.memory.search("tomato")
    voice_turn, follow_up = claude.requests
    text, transcript = _content(voice_turn)
    assert "[voice note 1: 0:04, transcribed]" in text["text"]
    assert transcript["text"].startswith('<attachment index="1">\n')
    said = transcript["text"].lower()
    assert "tomato" in said
    assert "tuesday" in said
    assert first.text == "I'll remind you on Tuesday."
    # The next turn replays the transcript from the store (downloaded once, never the audio).
    replayed = json.dumps(follow_up["messages"][0]["content"]).lower()
    assert "tomato" in replayed
    assert len(tg.downloads) == 1
    serialized = json.dumps(claude.requests)
    assert voice["file_id"] not in serialized
    assert voice["file_unique_id"] not in serialized
    assert TOKEN not in serialized
    # No audio in any form: not its bytes as base64 (an Ogg file starts "OggS"), not its type.
    assert base64.b64encode(clip("tomatoes.ogg")[:48]).decode() not in serialized
    assert "T2dnUw" not in serialized
    assert "audio/ogg" not in serialized
    assert second.text == "You asked about the plants."
    # Memory keeps what the person's message says (nothing: no caption), not the transcript.
    assert captured
    assert heard == []


async def test_a_round_video_note_is_transcribed_from_its_sound(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    recorded = tg.add_file(video_note(), "video_notes/file_0.mp4")
    note = {**recorded, "duration": 3, "length": 240}
    claude.script("Friday afternoon, noted.")
    async with App(make_config()) as app:
        await tg.push(tg.media_message(tg.private_chat(alice), alice, "", video_note=note))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    [request] = claude.requests
    text, transcript = _content(request)
    assert "[voice note 1: video note, 0:03, transcribed]" in text["text"]
    assert "friday" in transcript["text"].lower()
    assert answer.text == "Friday afternoon, noted."
    assert tg.downloads == ["video_notes/file_0.mp4"]


async def test_a_voice_note_alone_in_a_group_is_not_a_mention(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    group = tg.supergroup(GROUP_ID, "Garden club")
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    claude.script("Noted: tomatoes on Tuesday.")
    async with App(make_config()) as app:
        await tg.push(tg.media_message(group, alice, "", voice=tg.voice(clip("tomatoes.ogg"), 4)))
        captioned = tg.voice(clip("tomatoes.ogg"), 4)
        await tg.push(
            tg.media_message(group, alice, "can you note this?", mention=True, voice=captioned)
        )
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    [request] = claude.requests  # only the captioned mention started a turn
    text, transcript = _content(request)
    assert "can you note this?\n\n[voice note 1: 0:04, transcribed]" in text["text"]
    assert "tomato" in transcript["text"].lower()
    assert answer.text == "Noted: tomatoes on Tuesday."
    assert len(tg.downloads) == 1  # the voice note that was only context was never fetched


async def test_a_long_recording_and_a_damaged_one_each_get_one_line(
    tg: FakeTelegram, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=ALICE_ID)
    chat = tg.private_chat(alice)
    # Telegram declares a voice note's length: 20 minutes is refused before any download. An
    # audio file that declares 3 seconds but is not audio is downloaded and refused by PyAV.
    long_note = tg.voice(tone_wav(20 * 60), 20 * 60)
    damaged = tg.document(b"OggS" + bytes(range(256)) * 40, "memo.ogg", "audio/ogg")
    claude.script("Here is the plan.", "Sure, here it is.")
    async with App(make_config()) as app:
        await tg.push(tg.media_message(chat, alice, "plan my week", voice=long_note))
        await tg.wait_sent(1)
        await tg.push(tg.media_message(chat, alice, "and this one?", document=damaged))
        first, second = await tg.wait_sent(2)
        await app.host.idle()
    long_turn, damaged_turn = claude.requests
    assert (
        "plan my week\n\n[voice note 1: 20:00, not transcribed: it is 20:00 long, and I "
        "transcribe recordings of up to 5:00]" in _content(long_turn)[0]["text"]
    )
    assert first.text == (
        "I couldn't read “voice note”: it is 20:00 long, and I transcribe recordings of up to "
        "5:00.\n\nHere is the plan."
    )
    assert (
        "[voice note 1: memo.ogg, not transcribed: it could not be played as audio"
        in (_content(damaged_turn)[0]["text"])
    )
    assert second.text.startswith("I couldn't read “memo.ogg”: it could not be played as audio")
    assert second.text.endswith("\n\nSure, here it is.")
    assert tg.downloads == ["documents/memo.ogg"]  # the long note was refused unfetched
