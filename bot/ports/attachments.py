"""Attachments: a channel's file downloader, the attachment store and the turn's reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.turns import Attached, HistoryEntry, ReplyRoute, TurnRequest


class FileSource(Protocol):
    """A channel's downloader: attachment `index` (0-based) of the message behind `route`."""

    async def fetch(self, route: ReplyRoute, index: int, max_bytes: int) -> bytes:
        """The file's bytes, at most `max_bytes` (FileRefused("too_large") past that)."""


@dataclass(frozen=True, slots=True)
class StoredAttachment:
    content_id: str
    media_type: str
    data: bytes


class AttachmentStore(Protocol):
    """Attachments kept once by content id, visible to the conversations that shared them."""

    async def put(self, key: str, content_id: str, media_type: str, data: bytes) -> None: ...

    async def load(self, key: str, content_ids: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of those of `content_ids` that conversation `key` shared."""

    async def find(self, key: str, prefix: str) -> StoredAttachment | None:
        """The one attachment of conversation `key` whose content id starts with `prefix`."""

    async def forget(self, key: str, content_ids: Sequence[str]) -> None:
        """Conversation `key` no longer replays these (its history shows their markers alone)."""


class AttachmentReader(Protocol):
    """Reads a turn's attachments (`bot.attachments.AttachmentIntake`)."""

    async def take(self, request: TurnRequest, history: Sequence[HistoryEntry]) -> Attached:
        """This turn's blocks, the bytes to replay (this turn's and history's), problem lines."""

    async def forget(self, key: str, content_ids: Sequence[str]) -> None:
        """Keep these out of conversation `key`'s replays from now on (the model refused them)."""
