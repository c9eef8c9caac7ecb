"""Slack audio, transcribed on this machine, end to end: a real spoken audio clip shared in a
DM is downloaded from the fake Slack with the bot token, transcribed by faster-whisper with the
bundled model, and its words reach the request the fake Anthropic API recorded (never the audio,
the file id or its URL). A 20-minute recording and a damaged file shared with a question each get
one line, and the question is answered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, DM, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.voice.clips import clip, require_voice, tone_wav

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _voice() -> None:
    require_voice()


def _config(make_config: MakeConfig, slack: FakeSlack) -> Any:
    return make_config(f'files_url = "{slack.files_url}"\n')


def _content(body: dict[str, Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = body["messages"][-1]["content"]
    return content


async def test_an_audio_clip_in_a_dm_is_answered_from_what_was_said(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    # An audio clip recorded in Slack: subtype slack_audio, its length in duration_ms.
    recorded = slack.add_file("Audio clip", clip("budget.m4a"), "audio/mp4")
    recorded = {**recorded, "subtype": "slack_audio", "duration_ms": 3_136}
    claude.script("Friday afternoon it is.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "", files=[recorded]))
    [request] = claude.requests
    text, transcript = _content(request)
    assert "[voice note 1: Audio clip, 0:03, transcribed]" in text["text"]
    said = transcript["text"].lower()
    assert "budget" in said
    assert "friday" in said
    assert [post["text"] for post in slack.posts] == ["Friday afternoon it is."]
    assert slack.downloads == [recorded["id"]]
    serialized = json.dumps(claude.requests)
    for hidden in (recorded["id"], recorded["url_private"], "files-pri", "audio/mp4"):
        assert hidden not in serialized


async def test_a_long_recording_and_a_damaged_file_get_a_line_each_and_the_text_is_answered(
    slack: FakeSlack, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    # Twenty minutes of tone as a WAV (9.6 MB, under the download cap): Slack declares no
    # length for an uploaded file, so it is downloaded, and refused from its container's length.
    shared = [
        slack.add_file("all-hands.wav", tone_wav(20 * 60), "audio/wav"),
        slack.add_file("memo.m4a", b"\x00\x00\x00\x20ftypM4A " + bytes(4000), "audio/mp4"),
    ]
    claude.script("The standup is at ten.")
    async with App(_config(make_config, slack)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "when is the standup?", files=shared))
    [request] = claude.requests
    [text] = _content(request)
    assert text["text"].count("not transcribed") == 2
    assert "[voice note 1: all-hands.wav, 20:00, not transcribed: it is 20:00 long" in text["text"]
    assert (
        "[voice note 2: memo.m4a, not transcribed: it could not be played as audio"
        in (text["text"])
    )
    [post] = slack.posts
    assert post["text"].splitlines() == [
        "I couldn't read “all-hands.wav”: it is 20:00 long, and I transcribe recordings of up "
        "to 5:00.",
        "I couldn't read “memo.m4a”: it could not be played as audio (damaged, or not a sound "
        "recording).",
        "",
        "The standup is at ten.",
    ]
