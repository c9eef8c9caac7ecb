"""Voice: the transcriber that turns a voice note's bytes into words, on this machine."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Transcript:
    """What was said (`text`, empty when nothing was heard) and the audio's length in seconds."""

    text: str
    seconds: float


class Transcriber(Protocol):
    """Transcribes audio locally (`bot.voice.LocalTranscriber`); bounded in length and time."""

    @property
    def max_seconds(self) -> int:
        """The longest audio it transcribes; anything longer is refused as "too_long"."""

    async def transcribe(self, data: bytes) -> Transcript:
        """The words in `data` (any container PyAV reads: Ogg/Opus, MP4/AAC, MP3, WAV, WebM),
        or AudioRefused with the reason ("too_long", "unreadable", "failed", "timeout")."""


class SpeechEngine(Protocol):
    """A loaded speech model (`bot.voice.whisper`): one clip's bytes in, its transcript out;
    `stop` set abandons the work."""

    def run(self, data: bytes, max_seconds: int, stop: threading.Event) -> Transcript: ...
