"""Decoding with PyAV, bounded: the real clips decode to 16 kHz mono samples; a recording whose
container declares more than the cap is refused before decoding, one that lies about its length
stops at the cap while decoding; anything that is not audio is "unreadable" (never a traceback
from outside input). Hostile bytes are generated."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.errors import AudioRefused
from tests.attachments import files
from tests.voice.clips import clip, lying_webm, require_voice, tone_wav


@pytest.fixture(autouse=True)
def _voice() -> None:
    require_voice()


def test_the_clips_decode_to_16_khz_mono() -> None:
    from bot.voice.whisper import SAMPLE_RATE, decode

    for name, seconds in (("tomatoes.ogg", 3.5), ("budget.m4a", 3.1)):
        audio = decode(clip(name), 60)
        assert audio.dtype.name == "float32"
        assert abs(len(audio) / SAMPLE_RATE - seconds) < 0.2
        assert 0 < float(abs(audio).max()) <= 1.0


def test_a_declared_length_over_the_cap_is_refused_before_decoding() -> None:
    from bot.voice.whisper import decode

    with pytest.raises(AudioRefused) as caught:
        decode(tone_wav(20 * 60), 300)
    assert caught.value.reason == "too_long"
    assert caught.value.seconds == 1200


def test_a_file_that_lies_about_its_length_stops_at_the_cap() -> None:
    from bot.voice.whisper import SAMPLE_RATE, decode

    data = lying_webm(5, claimed_ms=500)
    with pytest.raises(AudioRefused) as caught:
        decode(data, 2)
    assert caught.value.reason == "too_long"
    assert caught.value.seconds is None  # only that it passed the cap is known
    assert abs(len(decode(data, 10)) / SAMPLE_RATE - 5) < 0.1


def test_a_stop_request_ends_decoding() -> None:
    from bot.voice.whisper import decode

    stop = threading.Event()
    stop.set()
    with pytest.raises(AudioRefused) as caught:
        decode(clip("tomatoes.ogg"), 60, stop)
    assert caught.value.reason == "timeout"


@pytest.mark.parametrize(
    "data",
    [b"", b"OggS" * 100, files.png(), files.pdf(1), b"RIFF\x00\x00\x00\x00WAVEfmt "],
    ids=["empty", "ogg-magic", "png", "pdf", "wav-header"],
)
def test_what_is_not_audio_is_unreadable(data: bytes) -> None:
    from bot.voice.whisper import decode

    with pytest.raises(AudioRefused) as caught:
        decode(data, 60)
    assert caught.value.reason == "unreadable"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(min_value=0, max_value=13_000), noise=st.binary(max_size=512))
def test_damaged_clips_decode_or_are_refused_never_crash(cut: int, noise: bytes) -> None:
    from bot.voice.whisper import decode

    data = clip("budget.m4a")
    damaged = data[:cut] + noise + data[cut + len(noise) :]
    reason = None
    try:
        audio = decode(damaged, 60)
    except AudioRefused as refused:
        reason = refused.reason
    assert reason in ("unreadable", "too_long") if reason is not None else len(audio) > 0
