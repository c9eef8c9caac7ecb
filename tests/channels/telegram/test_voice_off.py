"""Voice notes where transcription is off: `voice.enabled = false`, or the voice extra missing
(faster-whisper made unimportable for the test). Either way the note keeps the marker it always
had, is never downloaded, and the message is answered."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from bot.cli.compose import App
from tests.channels.telegram.conftest import MakeConfig
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

MARKER = "[attachment 1: voice note, voice or audio message (4 seconds, not transcribed), "


def _text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"][0]["text"])


@pytest.mark.parametrize("why", ["disabled", "not installed"])
async def test_a_voice_note_keeps_its_marker_when_transcription_is_off(
    tg: FakeTelegram,
    claude: FakeAnthropic,
    make_config: MakeConfig,
    monkeypatch: pytest.MonkeyPatch,
    why: str,
) -> None:
    if why == "not installed":
        monkeypatch.setitem(sys.modules, "faster_whisper", None)
    config = make_config("\n[voice]\nenabled = false\n" if why == "disabled" else "")
    alice = tg.user("Alice", "Chen", "alice", user_id=42)
    claude.script("I can't listen to that, sorry.")
    async with App(config) as app:
        voice = tg.voice(b"OggS" * 100, 4)
        await tg.push(tg.media_message(tg.private_chat(alice), alice, "listen", voice=voice))
        [answer] = await tg.wait_sent(1)
        await app.host.idle()
    [request] = claude.requests
    assert f"listen\n\n{MARKER}" in _text(request)
    assert answer.text == "I can't listen to that, sorry."
    assert tg.downloads == []
