"""Slack files shared with a message: what the event declares (pure), and the download of
`url_private` with the bot token (the `FileSource` the host asks for attachment N).

The file URLs stay in the hidden route (`files`), never in the TurnRequest. Only URLs under
`slack.files_url` are fetched (files.slack.com by default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from bot.errors import FileRefused
from bot.turns import Attachment, ReplyRoute
from channels.download import download

MAX_FILES = 20  # Slack attaches at most 10 files to a message; anything beyond is malformed


def declared_files(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The event's file objects, in the order the person attached them."""
    files = event.get("files")
    if not isinstance(files, list):
        return []
    return [f for f in files[:MAX_FILES] if isinstance(f, Mapping)]


def attachment(file: Mapping[str, Any]) -> Attachment:
    name = file.get("name") or file.get("title") or "file"
    media = file.get("mimetype") or "application/octet-stream"
    size = file.get("size")
    return Attachment(
        name=str(name),
        media_type=str(media),
        size=size if isinstance(size, int) and size >= 0 else 0,
        seconds=_audio_seconds(file, str(media)),
    )


def _audio_seconds(file: Mapping[str, Any], media: str) -> int | None:
    """An audio clip's or audio file's length (Slack's `duration_ms`), which also marks a clip
    recorded in Slack (`slack_audio`) as audio whatever container type it declares."""
    audio = media.lower().startswith("audio/") or file.get("subtype") == "slack_audio"
    millis = file.get("duration_ms")
    if audio and isinstance(millis, int) and not isinstance(millis, bool) and millis >= 0:
        return round(millis / 1000)
    return None


def file_url(file: Mapping[str, Any]) -> str | None:
    """Where the bytes are; None for a file Slack will not serve (deleted, hidden, external)."""
    for key in ("url_private_download", "url_private"):
        value = file.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class SlackFiles:
    """Downloads `url_private` with the bot token, from `files_url` only."""

    def __init__(self, token: str, files_url: str) -> None:
        self._token = token
        self._prefix = files_url
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self, route: ReplyRoute, index: int, max_bytes: int) -> bytes:
        urls = route.values.get("files")
        url = urls[index] if isinstance(urls, Sequence) and 0 <= index < len(urls) else None
        if not isinstance(url, str):
            raise FileRefused("refused", "Slack gives no download URL for this file")
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"Authorization": f"Bearer {self._token}"}
        return await download(
            self._session, url, prefix=self._prefix, max_bytes=max_bytes, headers=headers
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
