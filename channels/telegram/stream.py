"""Telegram's live answer messages (SPEC §7 streaming): one turn's `LiveSession`.

`native` shows the answer as a draft (`sendMessageDraft`) in private chats, where the Bot API
allows drafts: a draft is an ephemeral preview with no message behind it, so it leaves nothing
to clean up after a crash; a full part becomes a real message (`sendMessage`) when the answer
moves on to the next, and the last part is sent by delivery. In groups, and with `edits`, one
message is sent and edited (`editMessageText`) at most once per `interval` (groups get a longer
one: Telegram allows a bot about 20 messages a minute in a group). Delivery then finishes each
message with its final HTML part (`TelegramDeliverer.finish`).

`RetryAfter` becomes StreamBusy; a draft the Bot API refuses (drafts not available to this bot
or chat) becomes StreamRefused, which the deliverer turns into one warning and edits from then on.
"""

from __future__ import annotations

import datetime as dt
import warnings
import zlib
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from telegram import Bot, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from bot.errors import StreamBusy, StreamRefused
from bot.ports.delivery import LiveSession, LiveView

StreamMode = Literal["native", "edits", "off"]
FIX = (
    "Fix: drafts need a bot and chat the Bot API allows sendMessageDraft for (private chats; "
    'check the bot\'s settings in @BotFather), or set [telegram] stream = "edits" (or "off").'
)
# What `bot doctor` says of each mode.
MODES: dict[StreamMode, str] = {
    "native": "native: drafts (sendMessageDraft) in private chats, an edited message in groups. "
    "If Telegram refuses drafts, edits are used after one warning. " + FIX,
    "edits": "edits: one message edited at a bounded rate (editMessageText)",
    "off": "off: answers are sent when complete",
}


T = TypeVar("T")


def not_modified(exc: TelegramError) -> bool:
    return "message is not modified" in exc.message.lower()


class TelegramLive(LiveSession):
    """The live messages of one turn's answer in one Telegram chat (or topic)."""

    def __init__(
        self,
        bot: Bot,
        where: tuple[int, int | None, int | None],
        turn_id: str,
        *,
        drafts: bool,
        interval: float,
        visible: Callable[[], None],
        refused: Callable[[str], None],
    ) -> None:
        self._bot = bot
        self._chat_id, self._thread_id, self._reply_to = where  # chat, topic, message replied to
        self._drafts = drafts
        self._interval = interval
        self._visible = visible
        self._refused = refused
        # A draft id is non-zero and stable for the turn, so a draft's updates animate.
        self._draft_base = (zlib.crc32(turn_id.encode()) & 0x3FFFFFFF) * 16 + 1

    @property
    def interval(self) -> float:
        return self._interval

    async def open(self, index: int, first: str | None, view: LiveView) -> str | None:
        if self._drafts:
            try:
                await self._draft(index, view)
            except StreamRefused as exc:
                self._refused(str(exc))
                raise
            self._visible()
            return None
        reply_to = self._reply_to if index == 0 else None
        sent = await _call(
            self._bot.send_message(
                chat_id=self._chat_id,
                text=view.formatted,
                parse_mode=ParseMode.HTML,
                message_thread_id=self._thread_id,
                reply_parameters=reply_parameters(reply_to),
            )
        )
        self._visible()
        return str(sent.message_id)

    async def show(self, index: int, platform_id: str | None, view: LiveView) -> None:
        if platform_id is None:
            await self._draft(index, view)
            return
        try:
            await _call(
                self._bot.edit_message_text(
                    chat_id=self._chat_id,
                    message_id=int(platform_id),
                    text=view.formatted,
                    parse_mode=ParseMode.HTML,
                )
            )
        except BadRequest as exc:
            if not not_modified(exc):
                raise

    async def seal(self, index: int, platform_id: str | None, view: LiveView) -> str | None:
        if platform_id is not None:
            await self.show(index, platform_id, view)
            return platform_id
        sent = await _call(  # the full draft becomes the part's message
            self._bot.send_message(
                chat_id=self._chat_id,
                text=view.formatted,
                parse_mode=ParseMode.HTML,
                message_thread_id=self._thread_id,
            )
        )
        return str(sent.message_id)

    async def _draft(self, index: int, view: LiveView) -> None:
        try:
            await _call(
                self._bot.send_message_draft(
                    chat_id=self._chat_id,
                    draft_id=self._draft_base + index,
                    text=view.formatted,
                    message_thread_id=self._thread_id,
                    parse_mode=ParseMode.HTML,
                )
            )
        except TelegramError as exc:
            # PTB's BadRequest is a NetworkError, but a 400 is the Bot API's answer, not a passing
            # failure: where drafts are not allowed it says so (TEXTDRAFT_PEER_INVALID).
            if isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):
                raise  # a timeout or a dropped connection: the next update tries again
            raise StreamRefused(f"sendMessageDraft refused: {exc.message}. {FIX}") from None


async def _call(call: Awaitable[T]) -> T:
    """One call; Telegram's flood control as the stream's StreamBusy."""
    try:
        return await call
    except RetryAfter as exc:
        raise StreamBusy("Telegram flood control", retry_after_seconds(exc)) from None


def reply_parameters(message_id: int | None) -> ReplyParameters | None:
    if message_id is None:
        return None
    # If the triggering message was deleted meanwhile, the answer still goes to the chat.
    return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)


def retry_after_seconds(exc: RetryAfter) -> float:
    """RetryAfter's wait in seconds (PTB 22 warns when read as an int; the value is the same)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
