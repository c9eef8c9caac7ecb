"""Conversation history and the chat buffer: the stores of what was said in a conversation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.turns import HistoryEntry, PrecedingMessage


class HistoryStore(Protocol):
    async def load(self, key: str) -> list[HistoryEntry]:
        """The conversation's stored entries, oldest first; [] for a new or unreadable one."""

    async def publish(
        self, key: str, entries: Sequence[HistoryEntry], *, replace: bool = False
    ) -> None:
        """Append `entries` (or, with `replace`, make them the whole history) atomically."""

    async def reset(self, key: str) -> bool:
        """Forget one conversation; True when there was something to forget."""

    async def conversations(self) -> list[str]:
        """Every stored conversation key, most recently active first."""


@dataclass(frozen=True, slots=True)
class Chatter:
    """A message that starts no turn, kept in its chat's buffer (`key`) as context for a later
    turn there; the chat keeps its newest `keep` (`TurnSink.note`, `Inbox.note`)."""

    key: str
    message: PrecedingMessage
    keep: int

    def __post_init__(self) -> None:
        if self.keep < 1:
            raise ValueError(f"chat buffer size must be at least 1, got {self.keep}")


@dataclass(frozen=True, slots=True)
class Buffered:
    """What a chat buffer holds now, oldest first; `upto` is the newest row's id (None: empty).
    A turn that uses them passes `upto` to `TurnSink.submit`, which empties the buffer up to it
    in the transaction that stores the turn, so they are neither lost nor used twice."""

    messages: tuple[PrecedingMessage, ...] = ()
    upto: int | None = None


class ChatBuffer(Protocol):
    """A bounded, durable per-chat buffer of messages that started no turn (Telegram groups)."""

    async def append(self, key: str, message: PrecedingMessage, *, keep: int) -> None:
        """Buffer `message` for `key`, keeping only the newest `keep` messages there."""

    async def peek(self, key: str) -> Buffered:
        """Everything buffered for `key`, oldest first, without emptying it (a read: it works
        while the store cannot write)."""

    async def take(self, key: str) -> list[PrecedingMessage]:
        """Everything buffered for `key` since the last take, oldest first; empties the buffer."""


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """One conversation's history as an operator sees it (`bot history list`)."""

    key: str
    last_active: float  # unix seconds
    messages: int
    bytes: int
