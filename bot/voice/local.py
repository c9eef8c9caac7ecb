"""The `Transcriber` the attachment intake uses: faster-whisper on this machine, bounded.

At most one transcription per CPU core runs at a time (each on one CTranslate2 thread), apart
from the cap on model calls: a voice note waits here, not in a model-call slot. Each has a
timeout; when it passes, the worker thread is told to stop at its next segment and the slot is
freed only when the thread has really finished, so the bound holds. The model is loaded (after
its files are hashed) on the first voice note, once; a model that cannot be loaded fails every
voice note with reason "failed" (the log and `bot doctor` say why) and is not retried.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable

import structlog

from bot.errors import AudioRefused, ConfigError
from bot.ports.voice import SpeechEngine, Transcript
from bot.voice.model import ModelFiles, extra_installed, locate
from bot.voice.settings import VoiceSettings

log = structlog.get_logger(__name__)


def cores() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def whisper_loader(files: ModelFiles, language: str, workers: int) -> Callable[[], SpeechEngine]:
    """Loads the model with faster-whisper (imported only when the first voice note comes)."""

    def load() -> SpeechEngine:
        from bot.voice.whisper import WhisperEngine

        return WhisperEngine(files, workers=workers, language=language)

    return load


def build_transcriber(settings: VoiceSettings) -> LocalTranscriber | None:
    """The transcriber `[voice]` asks for; None (voice notes keep their marker) when it is off,
    the extra is not installed, or the model's files cannot be found (logged; doctor says why)."""
    if not settings.enabled:
        return None
    if not extra_installed():
        log.info("voice_extra_missing")
        return None
    try:
        files = locate(settings.model)
    except ConfigError as exc:
        log.warning("voice_model_missing", reason=str(exc))
        return None
    workers = cores()
    return LocalTranscriber(
        whisper_loader(files, settings.language, workers),
        max_seconds=settings.max_seconds,
        timeout=settings.timeout_seconds,
        workers=workers,
    )


class LocalTranscriber:
    """Transcribes on worker threads, at most `workers` at once, each within `timeout` seconds."""

    def __init__(
        self,
        load: Callable[[], SpeechEngine],
        *,
        max_seconds: int,
        timeout: float,
        workers: int,
    ) -> None:
        self._load = load
        self._max_seconds = max_seconds
        self._timeout = timeout
        self._slots = asyncio.Semaphore(workers)
        self._engine: SpeechEngine | None = None
        self._broken: str | None = None
        self._loading = asyncio.Lock()

    @property
    def max_seconds(self) -> int:
        return self._max_seconds

    async def transcribe(self, data: bytes) -> Transcript:
        engine = await self._ready()
        await self._slots.acquire()
        stop = threading.Event()
        try:
            work = asyncio.ensure_future(
                asyncio.to_thread(engine.run, data, self._max_seconds, stop)
            )
        except BaseException:
            self._slots.release()
            raise
        work.add_done_callback(self._finished)
        try:
            return await asyncio.wait_for(asyncio.shield(work), self._timeout)
        except TimeoutError:
            raise AudioRefused("timeout", f"over {self._timeout:g} s") from None
        except AudioRefused:
            raise
        except Exception as exc:  # a CTranslate2 or decoding failure: this note only
            log.warning("transcription_failed", error=type(exc).__name__)
            raise AudioRefused("failed", type(exc).__name__) from None
        finally:
            if not work.done():  # timed out or cancelled: the thread stops at its next segment
                stop.set()

    def _finished(self, work: asyncio.Future[Transcript]) -> None:
        self._slots.release()
        if not work.cancelled():
            work.exception()  # retrieved, so an abandoned run's error is not reported as lost

    async def _ready(self) -> SpeechEngine:
        async with self._loading:
            if self._engine is None and self._broken is None:
                try:
                    self._engine = await asyncio.to_thread(self._load)
                    log.info("voice_model_loaded")
                except ConfigError as exc:
                    self._broken = str(exc)
                except Exception as exc:  # CTranslate2 refused the files
                    self._broken = f"the model could not be loaded ({type(exc).__name__}: {exc})"
                if self._broken is not None:
                    log.error("voice_model_unusable", reason=self._broken)
        if self._engine is None:
            raise AudioRefused("failed", self._broken or "no model")
        return self._engine
