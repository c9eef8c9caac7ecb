"""One turn's attachments: fetched through the channel, read, stored once, and handed to the
assembler as blocks plus the bytes the request replays (this turn's and the history's).

The host calls `take` once per turn, before assembling. Each file is fetched through the
`FileSource` of the route's platform (the channel owns the URL or file id; the core only says
"attachment N"), refused early when its declared size is over the cap, read off the event loop
(decoding a photo takes tens of milliseconds), and stored under the sha256 of what the model
gets. Files are read on `DECODE_SLOTS` threads of their own (one), shared by the whole process, so
at most that many decodes run at once (one holds up to 64 MB of pixels; the model-call cap does
not bound them, since reading comes before the call) and the same thread's memory serves the
next. Voice notes and audio files go to the `Transcriber` when there is one (the `voice` extra,
`voice.enabled`): their transcript is stored and replayed like a text file's text, never the
audio. Without one they are never downloaded, and their marker says they were not transcribed.
Nothing a file did wrong fails the turn: it becomes the file's `problem`, shown in its marker and
told to the person in one line.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import structlog

from bot import replies
from bot.attachments.read import Ready, read_file
from bot.config import AttachmentSettings
from bot.errors import AudioRefused, FileRefused, FileUnreadable
from bot.ports.attachments import AttachmentStore, FileSource
from bot.ports.voice import Transcriber
from bot.prompt.attachments import clock_text, size_text
from bot.turns import Attached, Attachment, AttachmentBlock, HistoryEntry, TurnRequest

log = structlog.get_logger(__name__)

DECODE_SLOTS = 1
_DECODER = ThreadPoolExecutor(max_workers=DECODE_SLOTS, thread_name_prefix="attachment-decode")
_FETCH_PROBLEMS = {"refused": replies.DOWNLOAD_REFUSED, "failed": replies.DOWNLOAD_FAILED}


class AttachmentIntake:
    """Reads a turn's attachments; one per host, shared by every channel."""

    def __init__(
        self,
        store: AttachmentStore,
        settings: AttachmentSettings,
        sources: Mapping[str, FileSource],
        transcriber: Transcriber | None = None,
    ) -> None:
        """`sources`: each platform's downloader, by platform name; `transcriber`: voice
        notes' (None: they keep their "not transcribed" marker)."""
        self._store = store
        self._settings = settings
        self._sources = dict(sources)
        self._transcriber = transcriber

    async def take(self, request: TurnRequest, history: Sequence[HistoryEntry]) -> Attached:
        """This turn's attachment blocks, the bytes to replay, and the person's problem lines."""
        contents: dict[str, bytes] = {}
        blocks = [
            await self._one(request, index, item, contents)
            for index, item in enumerate(request.attachments)
        ]
        wanted = [
            block.content_id
            for entry in history
            for block in entry.blocks
            if isinstance(block, AttachmentBlock)
            and block.content_id is not None
            and block.content_id not in contents
        ]
        if wanted:
            contents.update(await self._load(request.conversation_key, wanted))
        problems = tuple(
            replies.attachment_problem(b.name, b.problem) for b in blocks if b.problem is not None
        )
        return Attached(tuple(blocks), contents, problems)

    async def forget(self, key: str, content_ids: Sequence[str]) -> None:
        try:
            await self._store.forget(key, content_ids)
        except Exception as exc:  # the next refusal leaves it out again; the turn goes on
            log.warning("attachments_forget_failed", error=type(exc).__name__)

    async def _load(self, key: str, wanted: Sequence[str]) -> Mapping[str, bytes]:
        try:
            return await self._store.load(key, list(dict.fromkeys(wanted)))
        except Exception as exc:  # history then shows markers only; the turn goes on
            log.warning("attachments_load_failed", error=type(exc).__name__)
            return {}

    async def _one(
        self, request: TurnRequest, index: int, item: Attachment, contents: dict[str, bytes]
    ) -> AttachmentBlock:
        block = AttachmentBlock(
            index + 1, item.name, _declared_kind(item), item.media_type, item.size
        )
        if block.kind == "audio" and self._transcriber is not None:
            return await self._voice(request, index, item, block, contents)
        if block.kind == "audio":
            seconds = {"seconds": item.seconds} if item.seconds is not None else {}
            return _with(block, detail=seconds)
        problem = self._precheck(request, index, item)
        if problem is not None:
            return _with(block, problem=problem)
        try:
            data = await self._fetch(request, index)
        except FileRefused as exc:
            log.info("attachment_not_fetched", index=index + 1, reason=exc.reason, detail=str(exc))
            reason = exc.reason
            limit = size_text(self._settings.max_bytes)
            problem = replies.file_too_large(limit) if reason == "too_large" else None
            return _with(
                block, problem=problem or _FETCH_PROBLEMS.get(reason, replies.DOWNLOAD_FAILED)
            )
        try:
            ready = await asyncio.get_running_loop().run_in_executor(
                _DECODER, read_file, item.name, item.media_type, data
            )
        except FileUnreadable as exc:
            log.info("attachment_refused", index=index + 1, size=len(data), reason=str(exc))
            return _with(block, size=len(data), problem=str(exc))
        content_id = await self._keep(request.conversation_key, ready)
        contents[content_id] = ready.data
        log.info("attachment_read", index=index + 1, kind=ready.kind, size=len(data))
        return AttachmentBlock(
            block.index,
            item.name,
            ready.kind,
            ready.media_type,
            len(data),
            content_id,
            ready.detail,
        )

    async def _voice(
        self,
        request: TurnRequest,
        index: int,
        item: Attachment,
        block: AttachmentBlock,
        contents: dict[str, bytes],
    ) -> AttachmentBlock:
        """A voice note or audio file, transcribed: its block points at the stored transcript."""
        assert self._transcriber is not None
        limit = self._transcriber.max_seconds
        declared = {"seconds": item.seconds} if item.seconds is not None else {}
        problem = self._precheck(request, index, item, audio=True)
        if problem is None and item.seconds is not None and item.seconds > limit:
            problem = replies.voice_too_long(clock_text(item.seconds), clock_text(limit))
        if problem is not None:
            return _with(block, problem=problem, detail=declared)
        try:
            data = await self._fetch(request, index)
        except FileRefused as exc:
            log.info("voice_not_fetched", index=index + 1, reason=exc.reason, detail=str(exc))
            too_large = replies.file_too_large(size_text(self._settings.max_bytes))
            problem = too_large if exc.reason == "too_large" else None
            problem = problem or _FETCH_PROBLEMS.get(exc.reason, replies.DOWNLOAD_FAILED)
            return _with(block, problem=problem, detail=declared)
        try:
            transcript = await self._transcriber.transcribe(data)
        except AudioRefused as exc:
            log.info("voice_not_transcribed", index=index + 1, reason=exc.reason, detail=str(exc))
            seconds = round(exc.seconds) if exc.seconds is not None else item.seconds
            detail = {"seconds": seconds} if seconds is not None else {}
            return _with(block, size=len(data), problem=_voice_problem(exc, limit), detail=detail)
        seconds = round(transcript.seconds)
        if not transcript.text.strip():
            log.info("voice_silent", index=index + 1, seconds=seconds)
            return _with(
                block, size=len(data), problem=replies.VOICE_SILENT, detail={"seconds": seconds}
            )
        text = transcript.text.strip()
        ready = Ready("voice", "text/plain", text.encode("utf-8"), {})
        content_id = await self._keep(request.conversation_key, ready)
        contents[content_id] = ready.data
        log.info("voice_transcribed", index=index + 1, seconds=seconds, chars=len(text))
        detail = {"seconds": seconds, "chars": len(text)}
        return AttachmentBlock(
            block.index, item.name, "voice", "text/plain", len(data), content_id, detail
        )

    def _precheck(
        self, request: TurnRequest, index: int, item: Attachment, *, audio: bool = False
    ) -> str | None:
        settings = self._settings
        if not settings.enabled:
            return replies.ATTACHMENTS_OFF
        if index >= settings.max_per_message:
            return replies.too_many_files(settings.max_per_message)
        if item.size > settings.max_bytes:
            return replies.file_too_large(size_text(settings.max_bytes))
        if not audio and item.media_type.lower().startswith("video/"):
            return replies.unsupported_type(item.media_type)
        if request.route is None or request.route.platform not in self._sources:
            return replies.NOT_FETCHABLE
        return None

    async def _fetch(self, request: TurnRequest, index: int) -> bytes:
        assert request.route is not None
        source = self._sources[request.route.platform]
        try:
            return await source.fetch(request.route, index, self._settings.max_bytes)
        except FileRefused:
            raise
        except Exception as exc:  # a channel bug or a network error: this file only
            raise FileRefused("failed", type(exc).__name__) from None

    async def _keep(self, key: str, ready: Ready) -> str:
        content_id = hashlib.sha256(ready.data).hexdigest()
        try:
            await self._store.put(key, content_id, ready.media_type, ready.data)
        except Exception as exc:  # this turn still sees it; history shows its marker later
            log.warning("attachment_store_failed", error=type(exc).__name__)
        return content_id


def _declared_kind(item: Attachment) -> str:
    media = item.media_type.lower()
    return "audio" if media.startswith("audio/") or item.seconds is not None else "file"


def _voice_problem(exc: AudioRefused, limit: int) -> str:
    if exc.reason == "too_long":
        length = clock_text(exc.seconds) if exc.seconds is not None else None
        return replies.voice_too_long(length, clock_text(limit))
    if exc.reason == "unreadable":
        return replies.VOICE_UNREADABLE
    if exc.reason == "timeout":
        return replies.VOICE_TIMED_OUT
    return replies.VOICE_FAILED


def _with(
    block: AttachmentBlock,
    *,
    size: int | None = None,
    problem: str | None = None,
    detail: Mapping[str, int] | None = None,
) -> AttachmentBlock:
    return AttachmentBlock(
        block.index,
        block.name,
        block.kind,
        block.media_type,
        block.size if size is None else size,
        None,
        dict(detail or {}),
        problem,
    )
