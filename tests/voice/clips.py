"""Real speech clips (committed, made once with espeak-ng: see tests/fixtures/voice/README.md)
and audio built in the tests with PyAV: a long tone, a WebM that lies about its length.

Every test that transcribes calls `require_voice()` first (an autouse fixture of its module): it
skips when the `voice` extra is not installed, except where TEST_VOICE=required (CI sets it),
where it fails instead, so a CI run can never pass by skipping transcription.
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest

from bot.voice.model import extra_installed

FIXTURES = Path(__file__).parent.parent / "fixtures" / "voice"
# What the clips say (espeak-ng's words); tiny.en hears them nearly right, so tests look for
# the distinctive words only.
TOMATOES = "Please water the tomato plants on Tuesday morning."
BUDGET = "The budget meeting moved to Friday afternoon."


def require_voice() -> None:
    if extra_installed():
        return
    if os.environ.get("TEST_VOICE") == "required":
        pytest.fail('TEST_VOICE=required but the voice extra is missing: pip install -e ".[voice]"')
    pytest.skip('the voice extra is not installed (pip install -e ".[voice]")')


def clip(name: str) -> bytes:
    """`tomatoes.ogg` (Opus in Ogg, 3.5 s) or `budget.m4a` (AAC in MP4, 3.1 s)."""
    return (FIXTURES / name).read_bytes()


def tone_wav(seconds: int, rate: int = 8000) -> bytes:
    """A 440 Hz tone as 8-bit mono WAV: 20 minutes is 9.6 MB, built in a few milliseconds."""
    import av
    import numpy as np

    out = io.BytesIO()
    second = (128 + np.sin(2 * np.pi * 440 * np.arange(rate) / rate) * 40).astype(np.uint8)
    with av.open(out, "w", format="wav") as container:
        stream = container.add_stream("pcm_u8", rate=rate, layout="mono")
        for index in range(seconds):
            frame = av.AudioFrame.from_ndarray(second.reshape(1, -1), format="u8", layout="mono")
            frame.sample_rate = rate
            frame.pts = index * rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def lying_webm(seconds: int, claimed_ms: float) -> bytes:
    """A WebM (Opus) tone of `seconds` whose header claims it lasts `claimed_ms`."""
    import av
    import numpy as np

    out = io.BytesIO()
    rate = 48_000
    second = (np.sin(2 * np.pi * 440 * np.arange(rate) / rate) * 3000).astype(np.int16)
    with av.open(out, "w", format="webm") as container:
        stream = container.add_stream("libopus", rate=rate, layout="mono")
        for index in range(seconds):
            frame = av.AudioFrame.from_ndarray(second.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = rate
            frame.pts = index * rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    data = bytearray(out.getvalue())
    at = data.find(b"\x44\x89\x88")  # the Segment's Duration element: an 8-byte float, in ms
    assert at > 0
    data[at + 3 : at + 11] = struct.pack(">d", claimed_ms)
    return bytes(data)


def video_note(name: str = "budget.m4a") -> bytes:
    """A round Telegram video note: MP4 with a small grey MPEG-4 video track and the clip's
    speech as its AAC audio track (the audio packets copied as they are)."""
    import av
    import numpy as np

    out = io.BytesIO()
    with (
        av.open(io.BytesIO(clip(name))) as source,
        av.open(out, "w", format="mp4") as container,
    ):
        heard = source.streams.audio[0]
        video = container.add_stream("mpeg4", rate=10)
        video.width = video.height = 64
        video.pix_fmt = "yuv420p"
        audio = container.add_stream_from_template(heard)
        grey = np.full((64, 64, 3), 128, dtype=np.uint8)
        seconds = float(heard.duration * heard.time_base) if heard.duration else 3.0
        for index in range(int(seconds * 10)):
            frame = av.VideoFrame.from_ndarray(grey, format="rgb24")
            frame.pts = index
            for packet in video.encode(frame):
                container.mux(packet)
        for packet in video.encode(None):
            container.mux(packet)
        for packet in source.demux(heard):
            if packet.dts is not None:
                packet.stream = audio
                container.mux(packet)
    return out.getvalue()
