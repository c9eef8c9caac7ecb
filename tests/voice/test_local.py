"""The transcriber's bounds, with engines written for the test (the real one is exercised in
test_decode.py and the channel tests): one run per worker slot at a time, a timeout that stops
the worker and keeps its slot until it has stopped, a model that cannot load failing each voice
note with "failed" (loaded once, not retried), and errors of the engine kept to the one note."""

from __future__ import annotations

import asyncio
import threading

import pytest

from bot.errors import AudioRefused, ConfigError
from bot.ports.voice import SpeechEngine, Transcript
from bot.voice.local import LocalTranscriber, build_transcriber, cores
from bot.voice.settings import VoiceSettings
from tests.voice.clips import require_voice
from tests.waiting import until


class Gate:
    """An engine whose runs wait until the test opens the gate (or they are told to stop)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.running = 0
        self.most = 0
        self.stopped = 0
        self.finished = 0
        self._lock = threading.Lock()

    def run(self, data: bytes, max_seconds: int, stop: threading.Event) -> Transcript:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            while not self.opened.wait(0.005):
                if stop.is_set():
                    self.stopped += 1
                    raise AudioRefused("timeout", "stopped")
            return Transcript(data.decode(), 1.0)
        finally:
            with self._lock:
                self.running -= 1
                self.finished += 1


def _transcriber(
    engine: SpeechEngine, *, workers: int = 2, timeout: float = 30.0
) -> LocalTranscriber:
    return LocalTranscriber(lambda: engine, max_seconds=60, timeout=timeout, workers=workers)


async def test_no_more_runs_than_workers_at_once() -> None:
    gate = Gate()
    transcriber = _transcriber(gate, workers=2)
    runs = [asyncio.create_task(transcriber.transcribe(f"note {i}".encode())) for i in range(5)]
    await until(lambda: gate.running == 2)
    assert not any(run.done() for run in runs)
    gate.opened.set()
    said = await asyncio.gather(*runs)
    assert [t.text for t in said] == [f"note {i}" for i in range(5)]
    assert gate.most == 2


async def test_a_run_past_its_timeout_is_stopped_and_keeps_its_slot_until_it_stops() -> None:
    gate = Gate()
    transcriber = _transcriber(gate, workers=1, timeout=0.05)
    with pytest.raises(AudioRefused) as caught:
        await transcriber.transcribe(b"long")
    assert caught.value.reason == "timeout"
    await until(lambda: gate.stopped == 1 and gate.finished == 1)
    gate.opened.set()
    assert (await transcriber.transcribe(b"next")).text == "next"
    assert gate.most == 1


async def test_a_cancelled_turn_stops_its_run() -> None:
    gate = Gate()
    transcriber = _transcriber(gate, workers=1)
    run = asyncio.create_task(transcriber.transcribe(b"note"))
    await until(lambda: gate.running == 1)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await until(lambda: gate.stopped == 1)


class Broken:
    def run(self, data: bytes, max_seconds: int, stop: threading.Event) -> Transcript:
        raise RuntimeError("CTranslate2 ran out of memory")


async def test_an_engine_error_fails_that_note_only() -> None:
    transcriber = _transcriber(Broken())
    with pytest.raises(AudioRefused) as caught:
        await transcriber.transcribe(b"x")
    assert caught.value.reason == "failed"
    assert str(caught.value) == "RuntimeError"


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (ConfigError("model.bin does not match its sha256. Fix: reinstall"), "does not match"),
        (RuntimeError("Unsupported model binary version"), "could not be loaded (RuntimeError"),
    ],
)
async def test_a_model_that_cannot_load_fails_each_note_and_is_loaded_once(
    error: Exception, shown: str
) -> None:
    loads = []

    def load() -> SpeechEngine:
        loads.append(1)
        raise error

    transcriber = LocalTranscriber(load, max_seconds=60, timeout=5, workers=1)
    for _ in range(2):
        with pytest.raises(AudioRefused) as caught:
            await transcriber.transcribe(b"x")
        assert caught.value.reason == "failed"
        assert shown in str(caught.value)
    assert loads == [1]
    assert transcriber.max_seconds == 60


def test_off_means_no_transcriber() -> None:
    assert build_transcriber(VoiceSettings(enabled=False)) is None


def test_a_missing_folder_means_no_transcriber_not_a_crash(tmp_path: object) -> None:
    require_voice()
    assert build_transcriber(VoiceSettings(model="/nonexistent/whisper")) is None


def test_the_bundled_model_makes_one_worker_per_core() -> None:
    require_voice()
    transcriber = build_transcriber(VoiceSettings(max_seconds=90))
    assert transcriber is not None
    assert transcriber.max_seconds == 90
    assert cores() >= 1
