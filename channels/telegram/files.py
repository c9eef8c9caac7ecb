"""Telegram files on a message (photo, document, voice, audio, video): what the message declares
(pure), and the download through `getFile` and the Bot API's file URL (the `FileSource`).

File ids stay in the hidden route (`files`). The download URL carries the bot token, so it is only
ever requested from the configured file server (`telegram.file_url`, by default the Bot API
server's `/file/bot`) and never appears in an error or a log line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from telegram import Bot
from telegram.error import TelegramError

from bot.errors import FileRefused
from bot.turns import Attachment, ReplyRoute
from channels.download import download

# Telegram's getFile refuses files over 20 MB (a local Bot API server lifts that).
GET_FILE_LIMIT = 20 * 1024 * 1024


def declared_files(message: Mapping[str, Any]) -> list[tuple[str, Attachment]]:
    """(file id, attachment) for each file the message carries; a message carries at most one."""
    photo = message.get("photo")
    if isinstance(photo, list) and photo:
        largest = max(
            (p for p in photo if isinstance(p, Mapping)),
            key=lambda p: int(p.get("width", 0)) * int(p.get("height", 0)),
        )
        return [(str(largest["file_id"]), _photo(largest))]
    for kind in ("document", "voice", "audio", "video", "video_note", "animation"):
        item = message.get(kind)
        if isinstance(item, Mapping) and item.get("file_id"):
            return [(str(item["file_id"]), _file(kind, item))]
    return []


def _photo(size: Mapping[str, Any]) -> Attachment:
    return Attachment("photo.jpg", "image/jpeg", _size(size))


_DEFAULT_TYPES = {
    "voice": "audio/ogg",
    "audio": "audio/mpeg",
    "video": "video/mp4",
    "video_note": "video/mp4",
    "animation": "video/mp4",
}
_DEFAULT_NAMES = {"voice": "voice note", "video_note": "video note"}


def _file(kind: str, item: Mapping[str, Any]) -> Attachment:
    media = item.get("mime_type") or _DEFAULT_TYPES.get(kind, "application/octet-stream")
    name = item.get("file_name") or item.get("title") or _DEFAULT_NAMES.get(kind, kind)
    duration = item.get("duration")
    # A length marks what the host may transcribe: voice notes, audio and round video notes.
    spoken = kind in ("voice", "audio", "video_note")
    seconds = int(duration) if spoken and isinstance(duration, int) else None
    return Attachment(str(name), str(media), _size(item), seconds)


def _size(item: Mapping[str, Any]) -> int:
    size = item.get("file_size")
    return size if isinstance(size, int) and size >= 0 else 0


class TelegramFiles:
    """getFile, then the file server's `<file_url><token>/<file_path>`, bounded."""

    def __init__(self, bot: Bot, token: str, file_url: str) -> None:
        self._bot = bot
        self._prefix = f"{file_url}{token}/"
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, route: ReplyRoute, index: int, max_bytes: int) -> bytes:
        ids = route.values.get("files")
        file_id = ids[index] if isinstance(ids, Sequence) and 0 <= index < len(ids) else None
        if not isinstance(file_id, str):
            raise FileRefused("refused", "no file id for this attachment")
        try:
            found = await self._bot.get_file(file_id)
        except TelegramError as exc:
            # "file is too big" is Telegram's 20 MB getFile limit.
            too_big = "too big" in exc.message.lower()
            raise FileRefused("too_large" if too_big else "refused", "getFile failed") from None
        if found.file_size is not None and found.file_size > max_bytes:
            raise FileRefused("too_large", f"getFile says {found.file_size} bytes")
        if not found.file_path:
            raise FileRefused("refused", "getFile gave no file path")
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return await download(
            self._session, found.file_path, prefix=self._prefix, max_bytes=max_bytes
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
