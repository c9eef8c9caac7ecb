"""Delivering answers to Telegram: format, split, send in order; typing while a turn runs.

The only reader of a Telegram `ReplyRoute`'s values (`chat_id`, `thread_id` for a forum topic,
`reply_to` for the message that triggered the turn in a group). The first part of an answer in a
group replies to the triggering message; the rest follow it in the same chat or topic.

Failures handled here, per part: `RetryAfter` (flood control) waits as long as Telegram asks and
tries again; "can't parse entities" resends that part as plain text; a group that became a
supergroup (`ChatMigrated`) is followed to its new id; a network error that cannot have posted
anything is retried briefly. Anything else stops the delivery and is reported honestly: the report
says how many parts Telegram accepted.

Streaming (`live`, `finish`; the sessions are `channels.telegram.stream`): `stream = "native"`
shows drafts in private chats and an edited message in groups, `"edits"` an edited message
everywhere, `"off"` whole answers only. `finish` edits a streamed message to its final part
(plain text when Telegram rejects the formatting; "message is not modified" is success, so
finishing twice is harmless); a message removed meanwhile is sent anew. The "typing…" sign stops
when the first text shows.

For the host's outbox, `render` gives the parts and `post` sends one, returning its message_id.
Telegram offers a bot no way to look up what it sent, so `find` never finds anything: a part whose
sendMessage went through just before the process died, before it was marked delivered, is sent
once more after the restart. That window is one part and one HTTP call wide (SPEC §11).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace

import structlog
from telegram import Bot, Message
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from bot.errors import DeliveryError, PartDelayed, PartFailed, RouteError
from bot.ports.delivery import Deliverer
from bot.ports.outbox import OutboxPart
from bot.turns import ReplyRoute
from channels.telegram.format import plain_text, to_telegram_html
from channels.telegram.mapping import PLATFORM
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT, split_html
from channels.telegram.stream import (
    StreamMode,
    TelegramLive,
    not_modified,
    reply_parameters,
    retry_after_seconds,
)

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


class TelegramDeliverer(Deliverer):
    """The Deliverer port for Telegram, on python-telegram-bot's Bot."""

    def __init__(
        self,
        bot: Bot,
        *,
        limit: int = TELEGRAM_MESSAGE_LIMIT,
        typing_interval: float = TYPING_INTERVAL,
        sleep: Sleep = asyncio.sleep,
        stream: StreamMode = "native",
        stream_interval: float = 1.0,
        group_stream_interval: float = 3.0,
    ) -> None:
        self._bot = bot
        self._limit = limit
        self._typing_interval = typing_interval
        self._sleep = sleep
        self._stream = stream
        self._stream_interval = stream_interval
        self._group_stream_interval = group_stream_interval
        self._typers: dict[tuple[int, int | None], asyncio.Task[None]] = {}

    @property
    def stream_mode(self) -> StreamMode:
        """How answers stream now ("edits" after Telegram refused drafts)."""
        return self._stream

    def live(self, route: ReplyRoute, turn_id: str) -> TelegramLive | None:
        if self._stream == "off":
            return None
        try:
            target = Target.of(route)
        except RouteError:
            return None
        private = target.chat_id > 0  # a private chat's id is the user's: positive
        key = (target.chat_id, target.thread_id)

        def visible() -> None:
            typing = self._typers.get(key)
            if typing is not None:
                typing.cancel()

        return TelegramLive(
            self._bot,
            (target.chat_id, target.thread_id, target.reply_to),
            turn_id,
            drafts=self._stream == "native" and private,
            interval=self._stream_interval if private else self._group_stream_interval,
            visible=visible,
            refused=self._refused,
        )

    def _refused(self, reason: str) -> None:
        if self._stream == "native":
            log.warning("telegram_drafts_refused", reason=reason)
            self._stream = "edits"

    async def finish(self, part: OutboxPart, first: str | None) -> str:
        """Edit a message a stream opened to the part's final text (or remove it)."""
        try:
            target = Target.of(part.route)
        except RouteError as exc:
            raise PartFailed(str(exc)) from None
        assert part.platform_id is not None
        message_id = int(part.platform_id)
        try:
            if not part.text:
                await self._remove(target.chat_id, message_id)
            else:
                await self._edit(target.chat_id, message_id, part.text)
        except _Gone:
            return await self.post(replace(part, platform_id=None), first)
        except TelegramError as exc:
            raise _passing_or_failed(exc) from None
        return part.platform_id

    async def _edit(self, chat_id: int, message_id: int, text: str) -> None:
        parse_mode: str | None = ParseMode.HTML
        waits = 0
        while True:
            try:
                await self._bot.edit_message_text(
                    chat_id=chat_id, message_id=message_id, text=text, parse_mode=parse_mode
                )
                return
            except RetryAfter as exc:
                seconds = retry_after_seconds(exc)
                waits += 1
                if waits > MAX_RATE_LIMIT_WAITS or seconds > MAX_RATE_LIMIT_WAIT:
                    raise
                await self._sleep(seconds)
            except BadRequest as exc:
                reason = exc.message.lower()
                if not_modified(exc):
                    return
                if "message to edit not found" in reason:
                    raise _Gone from None
                if parse_mode is None or "can't parse entities" not in reason:
                    raise
                log.warning("telegram_entities_rejected", reason=exc.message)
                text, parse_mode = plain_text(text), None

    async def _remove(self, chat_id: int, message_id: int) -> None:
        try:
            await self._bot.delete_message(chat_id=chat_id, message_id=message_id)
        except BadRequest as exc:
            if "not found" not in exc.message.lower():
                raise

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
        target = replace(target, reply_to=target.reply_to if part.index == 0 else None)
        receiver = part.route.values.get("receiver")
        try:
            if isinstance(receiver, int):
                return str(await self._post_privately(target, part, receiver))
            _, sent = await self._send(target, part.text)
        except TelegramError as exc:
            raise _passing_or_failed(exc) from None
        return str(sent.message_id)

    def private(self, route: ReplyRoute, public: str | None) -> ReplyRoute | None:
        """In a group, a reply only its person sees: a message visible to that member alone
        (Bot API 10.2's `receiver_user_id`), else a private chat with them, else `public` (or
        the reply itself) in the group; in a private chat the route itself."""
        values = route.values
        chat = values.get("chat_id")
        if isinstance(chat, int) and chat > 0:  # a private chat's id is its person's
            return route
        person = values.get("user_id")
        if not isinstance(person, int):
            return None
        return ReplyRoute(route.platform, {**values, "receiver": person, "public": public})

    async def _post_privately(self, target: Target, part: OutboxPart, receiver: int) -> int:
        """Post a part only `receiver` should see: to them alone in the group, else in their
        private chat with the bot, else (neither is possible) what may be said in the open."""
        extra = {"receiver_user_id": receiver}
        try:
            _, sent = await self._send(target, part.text, extra)
            if sent.api_kwargs.get("receiver_user_id") == receiver:
                return sent.message_id
            # A Bot API that does not know the parameter showed it to everyone: take it back.
            log.warning("telegram_private_message_unsupported")
            await self._remove(target.chat_id, sent.message_id)
        except BadRequest as exc:  # refused for this chat or member
            log.info("telegram_private_message_refused", reason=exc.message)
        try:
            _, sent = await self._send(Target(receiver), part.text)
            return sent.message_id
        except (BadRequest, Forbidden) as exc:  # they never opened a private chat with the bot
            log.info("telegram_private_chat_refused", reason=exc.message)
        public = part.route.values.get("public")
        said = self.render(part.route, public)[0] if isinstance(public, str) else part.text
        _, sent = await self._send(target, said)
        return sent.message_id

    async def find(self, part: OutboxPart, first: str | None) -> str | None:
        return None  # the Bot API cannot list a chat's messages: see the module docstring

    async def _send(
        self, target: Target, part: str, extra: Mapping[str, object] | None = None
    ) -> tuple[Target, Message]:
        """Post one part (`extra`: Bot API parameters PTB has no argument for yet); the target it
        went to (a migrated group has a new chat id) and the message."""
        parse_mode: str | None = ParseMode.HTML
        waits = network_tries = 0
        while True:
            try:
                sent = await self._bot.send_message(
                    chat_id=target.chat_id,
                    text=part,
                    parse_mode=parse_mode,
                    message_thread_id=target.thread_id,
                    reply_parameters=reply_parameters(target.reply_to),
                    api_kwargs=dict(extra) if extra else None,
                )
                return target, sent
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
        key = (target.chat_id, target.thread_id)
        self._typers[key] = task  # a stream that shows text cancels it early
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if self._typers.get(key) is task:
                del self._typers[key]

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


class _Gone(DeliveryError):
    """The message to finish was removed meanwhile (by a person): it is sent anew."""


def _passing_or_failed(exc: TelegramError) -> Exception:
    """Passing trouble (flood control, a timeout, a dropped connection) leaves the part in the
    outbox; anything else the Bot API answered, a 400 included (PTB's BadRequest is a
    NetworkError), fails it with Telegram's reason: sending it again would change nothing."""
    if isinstance(exc, RetryAfter):
        return PartDelayed(f"Telegram flood control: {exc.message}", retry_after_seconds(exc))
    passing = isinstance(exc, TimedOut) or (
        isinstance(exc, NetworkError) and not isinstance(exc, BadRequest)
    )
    return exc if passing else PartFailed(f"{type(exc).__name__}: {exc.message}")
