"""Delivering answers to Telegram: format, split, send in order; typing while a turn runs.

The only reader of a Telegram `ReplyRoute`'s values (`chat_id`, `thread_id` for a forum topic,
`reply_to` for the message that triggered the turn in a group). The first part of an answer in a
group replies to the triggering message; the rest follow it in the same chat or topic.

Failures handled here, per part: `RetryAfter` (flood control) waits as long as Telegram asks and
tries again; "can't parse entities" resends that part as plain text; a group that became a
supergroup (`ChatMigrated`) is followed to its new id; a network error that cannot have posted
anything is retried briefly. Anything else stops the delivery and is reported honestly: the report
says how many parts Telegram accepted.

For the host's outbox, `render` gives the parts and `post` sends one, returning its message_id.
Telegram offers a bot no way to look up what it sent, so `find` never finds anything: a part whose
sendMessage went through just before the process died, before it was marked delivered, is sent
once more after the restart. That window is one part and one HTTP call wide (SPEC §11).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace

import structlog
from telegram import Bot, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from bot.errors import PartFailed, RouteError
from bot.inbox import OutboxPart
from bot.ports import DeliveryReport
from bot.turns import ReplyRoute
from channels.telegram.format import plain_text, to_telegram_html
from channels.telegram.mapping import PLATFORM
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT, split_html

log = structlog.get_logger(__name__)

TYPING_INTERVAL = 4.0  # Telegram shows "typing…" for about 5 s after each sendChatAction
MAX_RATE_LIMIT_WAITS = 5
MAX_RATE_LIMIT_WAIT = 300.0  # seconds; a longer flood wait fails the delivery instead of hanging
NETWORK_RETRIES = 2

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a message goes: a chat, maybe a forum topic, maybe a message to reply to."""

    chat_id: int
    thread_id: int | None = None
    reply_to: int | None = None

    @classmethod
    def of(cls, route: ReplyRoute) -> Target:
        values = route.values
        if route.platform != PLATFORM or not isinstance(values.get("chat_id"), int):
            raise RouteError(
                f"route for platform {route.platform!r} has no integer chat_id; a Telegram route "
                "comes from the Telegram channel or from route_to('<chat id>[:<topic id>]')."
            )
        return cls(values["chat_id"], values.get("thread_id"), values.get("reply_to"))


def route_for(target: Target) -> ReplyRoute:
    return ReplyRoute(
        platform=PLATFORM,
        values={
            "chat_id": target.chat_id,
            "thread_id": target.thread_id,
            "reply_to": target.reply_to,
        },
    )


class TelegramDeliverer:
    """The Deliverer port for Telegram, on python-telegram-bot's Bot."""

    def __init__(
        self,
        bot: Bot,
        *,
        limit: int = TELEGRAM_MESSAGE_LIMIT,
        typing_interval: float = TYPING_INTERVAL,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._bot = bot
        self._limit = limit
        self._typing_interval = typing_interval
        self._sleep = sleep

    def route_to(self, destination: str) -> ReplyRoute:
        """A top-level route to `<chat id>` or `<chat id>:<topic id>` (cron's notify target)."""
        chat, _, topic = destination.removeprefix(f"{PLATFORM}:").partition(":")
        try:
            return route_for(Target(int(chat), int(topic) if topic else None))
        except ValueError:
            raise RouteError(
                f"Telegram destination {destination!r} is not '<chat id>' or "
                "'<chat id>:<topic id>' (numbers, e.g. '-1001234567890'). Fix the notify setting."
            ) from None

    def render(self, route: ReplyRoute, text: str) -> list[str]:
        return split_html(to_telegram_html(text), self._limit)

    async def post(self, part: OutboxPart, first: str | None) -> str:
        """Send one outbox part; the first replies to the triggering message (in groups)."""
        try:
            target = Target.of(part.route)
        except RouteError as exc:
            raise PartFailed(str(exc)) from None
        reply_to = target.reply_to if part.index == 0 else None
        try:
            _, message_id = await self._send(replace(target, reply_to=reply_to), part.text)
        except (RetryAfter, TimedOut, NetworkError):
            raise  # passing trouble: the part stays in the outbox
        except TelegramError as exc:
            raise PartFailed(f"{type(exc).__name__}: {exc.message}") from None
        return str(message_id)

    async def find(self, part: OutboxPart, first: str | None) -> str | None:
        return None  # the Bot API cannot list a chat's messages: see the module docstring

    async def deliver(self, route: ReplyRoute, text: str) -> DeliveryReport:
        target = Target.of(route)
        parts = self.render(route, text)
        accepted = 0
        for index, part in enumerate(parts):
            reply_to = target.reply_to if index == 0 else None
            try:
                target, _ = await self._send(replace(target, reply_to=reply_to), part)
            except TelegramError as exc:
                log.warning(
                    "telegram_delivery_failed",
                    part=index + 1,
                    parts=len(parts),
                    error=type(exc).__name__,
                    reason=exc.message,
                )
                return DeliveryReport(len(parts), accepted, f"{type(exc).__name__}: {exc.message}")
            accepted += 1
        return DeliveryReport(len(parts), accepted)

    async def _send(self, target: Target, part: str) -> tuple[Target, int]:
        """Post one part; the target it went to (a migrated group has a new chat id) and the
        message's id."""
        parse_mode: str | None = ParseMode.HTML
        waits = network_tries = 0
        while True:
            try:
                sent = await self._bot.send_message(
                    chat_id=target.chat_id,
                    text=part,
                    parse_mode=parse_mode,
                    message_thread_id=target.thread_id,
                    reply_parameters=_reply(target.reply_to),
                )
                return target, sent.message_id
            except RetryAfter as exc:
                seconds = retry_after_seconds(exc)
                waits += 1
                if waits > MAX_RATE_LIMIT_WAITS or seconds > MAX_RATE_LIMIT_WAIT:
                    raise
                log.info("telegram_rate_limited", retry_after=seconds, attempt=waits)
                await self._sleep(seconds)
            except BadRequest as exc:
                if parse_mode is None or "can't parse entities" not in exc.message.lower():
                    raise
                log.warning("telegram_entities_rejected", reason=exc.message)
                part, parse_mode = plain_text(part), None
            except ChatMigrated as exc:
                log.info("telegram_chat_migrated")
                target = replace(target, chat_id=int(exc.new_chat_id))
            except TimedOut:
                raise  # the message may have been posted: retrying could post it twice
            except NetworkError:
                network_tries += 1
                if network_tries > NETWORK_RETRIES:
                    raise
                await self._sleep(0.5 * network_tries)

    def working(self, route: ReplyRoute) -> AbstractAsyncContextManager[None]:
        """Keep "typing…" showing in the chat (or topic) while the context is open."""
        return self._typing(Target.of(route))

    @contextlib.asynccontextmanager
    async def _typing(self, target: Target) -> AsyncIterator[None]:
        task = asyncio.create_task(self._keep_typing(target))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep_typing(self, target: Target) -> None:
        while True:
            try:
                await self._bot.send_chat_action(
                    chat_id=target.chat_id,
                    action=ChatAction.TYPING,
                    message_thread_id=target.thread_id,
                )
            except TelegramError as exc:  # a progress sign is never worth failing a turn
                log.debug("telegram_typing_failed", error=type(exc).__name__)
            await self._sleep(self._typing_interval)


def _reply(message_id: int | None) -> ReplyParameters | None:
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
