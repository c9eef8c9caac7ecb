"""Decoding with PyAV and transcription with faster-whisper: the only importer of av,
faster_whisper and ctranslate2. Blocking calls; `bot.voice.local` runs them on worker threads.

Decoding is bounded before it costs anything: the container's declared length is checked first,
then the decoded samples are counted, so a file that lies about its length still stops at the
cap (16 kHz mono float32: 300 s is under 20 MB). The model is loaded from its folder only
(`local_files_only`, with tokenizer.json present), after `bot.voice.model.verify` has hashed its
files, so nothing is ever fetched from a model hub.
"""

from __future__ import annotations

import io
import threading

import av
import numpy as np
from faster_whisper import WhisperModel
from numpy.typing import NDArray

from bot.errors import AudioRefused
from bot.ports.voice import Transcript
from bot.voice.model import ModelFiles, verify

SAMPLE_RATE = 16_000
_MICROSECONDS = 1_000_000


class WhisperEngine:
    """One loaded model; `run` may be called from up to `workers` threads at once (CTranslate2
    keeps one worker per thread, one CPU thread each)."""

    def __init__(self, files: ModelFiles, *, workers: int, language: str = "") -> None:
        verify(files)
        self._model = WhisperModel(
            str(files.folder),
            device="cpu",
            compute_type="int8",
            cpu_threads=1,
            num_workers=workers,
            local_files_only=True,
        )
        self._language = language or None

    @property
    def multilingual(self) -> bool:
        return bool(self._model.model.is_multilingual)

    def run(self, data: bytes, max_seconds: int, stop: threading.Event) -> Transcript:
        """The words in `data`; AudioRefused when it is too long, not audio, or `stop` is set."""
        audio = decode(data, max_seconds, stop)
        seconds = len(audio) / SAMPLE_RATE
        segments, _ = self._model.transcribe(
            audio,
            language=self._language if self.multilingual else "en",
            vad_filter=True,  # silence is skipped, not turned into invented words
            condition_on_previous_text=False,  # so one misheard window cannot start a loop
            # Whisper's check for repetition loops also throws away speech that repeats itself
            # (a list, a chant, a clip said twice) and retries it at five more temperatures:
            # six times the work for a worse answer. Off; the two settings above keep loops rare.
            compression_ratio_threshold=None,
            without_timestamps=True,
        )
        said = []
        for segment in segments:  # lazy: each segment is decoded as it is asked for
            if stop.is_set():
                raise AudioRefused("timeout", "stopped between segments", seconds)
            said.append(segment.text.strip())
        return Transcript(" ".join(part for part in said if part), seconds)


def decode(
    data: bytes, max_seconds: int, stop: threading.Event | None = None
) -> NDArray[np.float32]:
    """The first audio stream of `data` as 16 kHz mono float32 samples, at most `max_seconds`."""
    limit = max_seconds * SAMPLE_RATE
    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioRefused("unreadable", "no audio stream")
            declared = container.duration
            if declared is not None and declared / _MICROSECONDS > max_seconds:
                raise AudioRefused("too_long", "declared length", declared / _MICROSECONDS)
            resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            chunks: list[NDArray[np.int16]] = []
            total = 0
            for frame in container.decode(audio=0):
                for piece in resampler.resample(frame):
                    samples = np.asarray(piece.to_ndarray(), dtype=np.int16).reshape(-1)
                    total += len(samples)
                    if total > limit:
                        raise AudioRefused("too_long", "decoded length passed the cap")
                    chunks.append(samples)
                if stop is not None and stop.is_set():
                    raise AudioRefused("timeout", "stopped while decoding", total / SAMPLE_RATE)
            for piece in resampler.resample(None):
                tail = np.asarray(piece.to_ndarray(), dtype=np.int16).reshape(-1)
                chunks.append(tail[: max(limit - total, 0)])
    except AudioRefused:
        raise
    except Exception as exc:  # av.FFmpegError, or anything a hostile file makes the demuxer do
        raise AudioRefused("unreadable", type(exc).__name__) from None
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
    if samples.size == 0:
        raise AudioRefused("unreadable", "no samples decoded")
    return samples.astype(np.float32) / np.float32(32768.0)
