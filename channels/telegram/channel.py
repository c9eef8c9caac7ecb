"""The Telegram channel: python-telegram-bot's Bot, run inside the host's event loop.

Updates arrive by long polling (the default) or, in webhook mode, as POSTs to a route on the
host's own HTTP port, checked against `TELEGRAM_WEBHOOK_SECRET`. Updates of one chat are taken one
at a time, in order (so a group message is buffered before a later mention in that chat takes the
buffer); different chats' updates are taken side by side, so a getUpdates batch is stored in
about one transaction (the store commits writes that arrive together as one). Someone leaving a
group changes what their DM may recall, so such an update waits for the ones before it and the
ones after it wait for it. `mapping.decide`
says whether an update starts a turn, is kept in the chat buffer as context, or is ignored, and
the host records it durably under its update_id (a turn's request, or a kept message's place in
the buffer, goes in in the same transaction), so a redelivered update starts nothing and is
buffered once.

Nothing is confirmed to Telegram before it is stored. The polling loop is our own (PTB's Updater
confirms every update it fetched on its next call, handled or not): it advances the getUpdates
offset once per batch, past the updates the host has stored, and when the host cannot (shutting
down, store unwritable) it asks again from the first one not stored, or stops (an update of
another chat stored meanwhile comes again and is recognised by its mark). The webhook answers 503
instead of 200, and Telegram delivers the update again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import ssl
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web
from telegram import (
    Bot,
    BotCommand,
    BotCommandScope,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
    Update,
)
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application
from telegram.request import HTTPXRequest

from bot.config import Secrets
from bot.errors import ConfigError, IntakeUnavailable
from bot.ports.approvals import Card, PressDesk
from bot.ports.history import ChatBuffer, Chatter
from bot.ports.intake import Admission, TurnSink
from bot.ports.leadership import Leadership
from bot.ports.memory import Departure, Departures
from bot.replies import command_menu
from bot.turns import ReplyRoute
from channels.telegram import approvals
from channels.telegram.deliver import TelegramDeliverer
from channels.telegram.files import TelegramFiles
from channels.telegram.mapping import (
    PLATFORM,
    Access,
    BotIdentity,
    Ignore,
    Keep,
    Left,
    StartTurn,
    decide,
)
from channels.telegram.settings import TelegramSettings

log = structlog.get_logger(__name__)

POLLING_DUTY = "telegram-polling"

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# Only these update kinds can start a turn or feed the buffer; asking for no others saves traffic.
ALLOWED_UPDATES = [Update.MESSAGE, Update.CHANNEL_POST, Update.CALLBACK_QUERY]
POLL_BACKOFF = 0.5  # first wait after a failed getUpdates or an update not stored; doubles
POLL_BACKOFF_MAX = 30.0


_REFUSED_TOKEN = (
    "Telegram refused TELEGRAM_BOT_TOKEN (getMe said unauthorized). Fix: copy the token again "
    "from @BotFather (/mybots -> API Token); a revoked token needs the new one."
)
_NO_TOKEN = (
    "TELEGRAM_BOT_TOKEN is not set but [telegram] enabled = true. Fix: export the token "
    "BotFather gave you (or put it in .env), or set telegram.enabled = false."
)


async def check_token(settings: TelegramSettings, secrets: Secrets) -> str:
    """For `bot doctor`: call getMe with the configured token; says which bot answered."""
    token = secrets.get("TELEGRAM_BOT_TOKEN")
    if not token:
        raise ConfigError(_NO_TOKEN)
    try:
        async with Bot(token, base_url=settings.api_url) as bot:
            me = await bot.get_me()
    except InvalidToken:
        raise ConfigError(_REFUSED_TOKEN) from None
    except TelegramError as exc:
        raise ConfigError(
            f"getMe at {settings.api_url} failed ({type(exc).__name__}: {exc.message}). Fix: "
            "check telegram.api_url (it must end in /bot) and the network."
        ) from None
    privacy = (
        "privacy mode off: group chatter is used as context"
        if me.can_read_all_group_messages
        else "privacy mode on: in groups it sees only messages addressed to it (for group "
        "context, BotFather /setprivacy -> Disable, then re-add the bot to the group)"
    )
    return f"@{me.username} answered getMe; {privacy}"


class TelegramChannel:
    """The Channel port for Telegram."""

    name = PLATFORM

    def __init__(
        self,
        settings: TelegramSettings,
        secrets: Secrets,
        http: web.Application | None = None,
        *,
        buffer: ChatBuffer,
        departures: Departures | None = None,
        leader: Leadership | None = None,
        tls: ssl.SSLContext | None = None,
        schedules: bool = False,
    ) -> None:
        """`tls`: the TLS client context for the Bot API (shared with the other HTTPS clients);
        None builds PTB's own (one per HTTP client). `schedules`: schedules from chat are on, so
        the command menus offer /schedules."""
        token = secrets.get("TELEGRAM_BOT_TOKEN")
        if not token:
            raise ConfigError(_NO_TOKEN)
        self._settings = settings
        self._schedules = schedules
        self._buffer = buffer
        self._departures = departures
        self._access = Access(
            frozenset(settings.allowed_chat_ids), frozenset(settings.allowed_user_ids)
        )
        self._sink: TurnSink | None = None
        # With replicas, only the one holding the polling duty polls (two pollers conflict); the
        # others stand by (healthy) and take over when it dies. None: this process is the only one.
        self._leader = leader
        self._me: BotIdentity | None = None
        self._webhook_secret: str | None = None
        # Keys the pseudonymous surface ids of private chats; derived from the token (a secret
        # that is stable across restarts), so the same DM keeps its id and memory scope.
        self._dm_key = hashlib.sha256(b"telegram-dm-surface\0" + token.encode()).digest()
        if settings.mode == "webhook":
            self._webhook_secret = _webhook_secret(secrets, http)
            assert http is not None
            http.router.add_post(settings.webhook_path, self._on_webhook)
        # No Updater: our own loop polls (see the module docstring); updates never queue in PTB.
        builder = (
            Application.builder()
            .token(token)
            .base_url(settings.api_url)
            .base_file_url(settings.files_base)
        )
        if tls is not None:  # PTB's two clients (getUpdates has its own), with its pool sizes
            verify = {"verify": tls}
            builder = builder.request(HTTPXRequest(httpx_kwargs=verify)).get_updates_request(
                HTTPXRequest(connection_pool_size=1, httpx_kwargs=verify)
            )
        self._app = builder.updater(None).build()
        self.deliverer = TelegramDeliverer(
            self._app.bot,
            stream=settings.stream,
            stream_interval=settings.stream_interval,
            group_stream_interval=settings.group_stream_interval,
        )
        self.files = TelegramFiles(self._app.bot, token, settings.files_base)
        self._taking = KeyedLocks()  # one update of a chat at a time, polled or posted
        self._poller: asyncio.Task[None] | None = None
        self._offset: int | None = None  # the next update_id to ask for; all below are stored
        self._confirmed: int | None = None  # the offset Telegram was last told
        self._desk: PressDesk | None = None  # where presses on approval cards go

    def use_approvals(self, desk: PressDesk) -> None:
        self._desk = desk

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        return await approvals.post_card(self._app.bot, route, card)

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        await approvals.close_card(self._app.bot, where, text)

    @property
    def connected(self) -> bool:
        """For /healthz: started, and (when polling) the polling loop is running."""
        polling = self._poller is not None and not self._poller.done()
        return self._app.running and (self._settings.mode == "webhook" or polling)

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        self._sink = sink
        try:
            await self._start(intake)
        except BaseException:
            await self.stop()  # nothing half-started stays behind (HTTP clients, tasks)
            raise
        log.info("telegram_started", mode=self._settings.mode, bot=self._app.bot.username)

    async def _start(self, intake: bool) -> None:
        try:
            await self._app.initialize()  # getMe: who the bot is, for mentions and replies
        except InvalidToken:
            # PTB's own message quotes the token; this one does not.
            raise ConfigError(_REFUSED_TOKEN) from None
        bot = self._app.bot
        self._me = BotIdentity(bot.id, bot.username)
        if not intake:
            return  # ready to deliver; polling or a webhook change would take a host's updates
        await self._app.start()
        if self._settings.mode == "polling":
            if self._leader is None:
                await bot.delete_webhook()  # getUpdates is refused while a webhook is set
            self._poller = asyncio.create_task(self._poll_when_elected(), name="telegram-polling")
        elif self._settings.webhook_url:
            await bot.set_webhook(
                url=self._settings.webhook_url,
                secret_token=self._webhook_secret,
                allowed_updates=ALLOWED_UPDATES,
            )
        await self._register_commands()

    async def _register_commands(self) -> None:
        """List the host's chat commands in Telegram's command menu, one list for private chats
        and one for groups (the default scope gets the group list: it is what every chat may
        see); a refusal is only logged."""
        private = command_menu(private=True, schedules=self._schedules)
        groups = command_menu(private=False, schedules=self._schedules)
        menus: list[tuple[BotCommandScope | None, Sequence[tuple[str, str]]]] = [
            (None, groups),
            (BotCommandScopeAllPrivateChats(), private),
            (BotCommandScopeAllGroupChats(), groups),
        ]
        for scope, menu in menus:
            commands = [BotCommand(name, description) for name, description in menu]
            try:
                await self._app.bot.set_my_commands(commands, scope=scope)
            except TelegramError as exc:
                where = scope.type if scope is not None else "default"
                log.warning("telegram_commands_not_registered", scope=where, error=exc.message)

    async def _poll_when_elected(self) -> None:
        """Poll; with replicas, only while this one holds the polling duty (standing by is
        healthy). A holder whose database connection was cut stands by until it holds it again."""
        while True:
            if self._leader is not None:
                log.info("telegram_polling_standby")
                await self._leader.acquire(POLLING_DUTY)
                log.info("telegram_polling_elected")
                await self._app.bot.delete_webhook()
            if not await self._poll():
                return

    async def stop(self) -> None:
        """Stop polling (confirming what was stored), then the Application."""
        await self._stop_polling()
        if self._leader is not None:
            await self._leader.release(POLLING_DUTY)
        if self._app.running:
            await self._app.stop()
        await self._app.shutdown()
        # After a failed initialize (a refused token) the Application shuts nothing down; the
        # bot's own HTTP clients were opened for getMe all the same.
        await self._app.bot.shutdown()
        await self.files.aclose()

    async def _stop_polling(self) -> None:
        poller, self._poller = self._poller, None
        if poller is None:
            return
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller
        if self._offset is not None and self._offset != self._confirmed:
            # Tell Telegram what was stored, so the next start is not handed it again (it would
            # be recognized and skipped anyway).
            with contextlib.suppress(TelegramError):
                await self._app.bot.get_updates(offset=self._offset, timeout=0, limit=1)

    # --- intake ---------------------------------------------------------------------------------

    async def _poll(self) -> bool:
        """getUpdates in a loop; the offset moves past an update only once it is stored. Returns
        True when the polling duty was lost, False when the host stopped taking updates."""
        backoff = POLL_BACKOFF
        while True:
            if self._leader is not None and not self._leader.holds(POLLING_DUTY):
                log.warning("telegram_polling_duty_lost")
                return True
            try:
                updates = await self._app.bot.get_updates(
                    offset=self._offset,
                    timeout=self._settings.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                )
            except TelegramError as exc:
                log.warning("telegram_poll_failed", error=type(exc).__name__, wait=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, POLL_BACKOFF_MAX)
                continue
            self._confirmed = self._offset
            taken = await self._take_all(updates)
            if taken is None:
                log.info("telegram_polling_stopped", reason="the host is shutting down")
                return False
            if taken:
                backoff = POLL_BACKOFF
            else:
                await asyncio.sleep(backoff)  # the store cannot write: ask again, slower
                backoff = min(backoff * 2, POLL_BACKOFF_MAX)

    async def _take_all(self, updates: tuple[Update, ...]) -> bool | None:
        """Take a batch, each chat's updates in order and the chats side by side; the offset
        moves past the stored ones up to the first that was not. True when all were taken,
        False when one could not be stored for now, None when the host no longer takes any."""
        taken: dict[int, bool | None] = {}
        chats: dict[object, list[dict[str, Any]]] = {}

        async def take_chat(payloads: list[dict[str, Any]]) -> None:
            for payload in payloads:  # a chat's later updates wait for its earlier ones
                try:
                    stored: bool | None = await self._take(payload)
                except IntakeUnavailable as exc:
                    stored = None if exc.closing else False
                taken[int(payload["update_id"])] = stored
                if not stored:
                    return

        async def take_chats() -> None:
            await asyncio.gather(*(take_chat(payloads) for payloads in chats.values()))
            chats.clear()

        for update in updates:
            payload = update.to_dict()
            if _crosses_chats(payload):  # what came before it is taken first, then it alone
                await take_chats()
                await take_chat([payload])
            else:
                chats.setdefault(_chat_of(payload), []).append(payload)
        await take_chats()
        for update in updates:
            stored = taken.get(update.update_id, False)
            if not stored:
                return stored
            self._offset = update.update_id + 1
        return True

    async def _take(self, payload: dict[str, Any]) -> bool:
        """Take one update (Bot API JSON); False when it could not be stored. Raises
        IntakeUnavailable when the host takes nothing now."""
        async with self._taking.hold(_chat_of(payload)):
            try:
                return await self._handle(payload)
            except IntakeUnavailable:
                raise
            except Exception:  # one bad update must not stop the ones behind it
                log.exception("telegram_update_failed", update_id=payload.get("update_id"))
                return True

    async def _handle(self, payload: dict[str, Any]) -> bool:
        """Decide what one update means and act on it; False when it could not be stored."""
        assert self._sink is not None, "start() the channel first"
        assert self._me is not None
        update_id = str(payload.get("update_id"))
        query = payload.get("callback_query")
        if isinstance(query, dict):  # a press on a card's button: taken once, answered always
            if await self._sink.note(source=PLATFORM, marks=[update_id]):
                await approvals.press(self._app.bot, self._desk, query)
            return True
        decision = decide(
            payload,
            self._me,
            self._access,
            turn_id=uuid.uuid4().hex,
            received_at=datetime.now(UTC),
            dm_key=self._dm_key,
        )
        if isinstance(decision, StartTurn):
            return await self._start_turn(decision, update_id)
        # A kept message is buffered in the transaction that records its update as seen: a
        # crash cannot lose it nor, after the redelivery, buffer it twice.
        chatter = None
        if isinstance(decision, Keep):
            chatter = Chatter(decision.key, decision.message, self._settings.group_buffer)
        if not await self._sink.note(source=PLATFORM, marks=[update_id], chatter=chatter):
            log.info("telegram_update_duplicate", update_id=update_id)
        elif isinstance(decision, Ignore):
            log.debug("telegram_update_ignored", update_id=update_id, reason=decision.reason)
        elif isinstance(decision, Left):
            if self._departures is not None:
                left = Departure(PLATFORM, decision.surface_id, decision.person, decision.at)
                await self._departures.left(left)
        else:
            log.debug(
                "telegram_message_kept", conversation_key=decision.key, reason=decision.reason
            )
        return True

    async def _start_turn(self, decision: StartTurn, update_id: str) -> bool:
        assert self._sink is not None
        key = decision.request.conversation_key
        # Read, not taken: the inbox empties the buffer in the transaction that stores the turn,
        # so a turn that cannot be stored (full disk, shutting down) leaves it whole.
        try:
            buffered = await self._buffer.peek(key)
        except Exception as exc:  # the store cannot be read: not stored, so not confirmed
            log.warning("telegram_buffer_unreadable", error=type(exc).__name__)
            raise IntakeUnavailable(type(exc).__name__) from None
        request = replace(decision.request, preceding=buffered.messages)
        admission = await self._sink.submit(
            request, source=PLATFORM, marks=[update_id], consumes=buffered.upto
        )
        log.info(
            "telegram_turn_submitted",
            turn_id=request.turn_id,
            conversation_key=key,
            preceding=len(buffered.messages),
            admission=admission.value,
        )
        if admission in (Admission.BUSY, Admission.RATE_LIMITED):
            # Stored, then refused: the turn that would have read them does not run, so they
            # go back for the next one.
            for message in buffered.messages:
                await self._buffer.append(key, message, keep=self._settings.group_buffer)
        if admission is Admission.CLOSED:
            raise IntakeUnavailable("the host is shutting down", closing=True)
        return admission.acknowledge

    async def _on_webhook(self, request: web.Request) -> web.Response:
        secret = request.headers.get(SECRET_HEADER, "")
        assert self._webhook_secret is not None
        if not hmac.compare_digest(secret.encode(), self._webhook_secret.encode()):
            log.warning("telegram_webhook_forbidden", remote=request.remote)
            return web.Response(status=401, text="wrong or missing secret token\n")
        if not self._app.running:
            return web.Response(status=503, text="not started\n")
        try:
            data = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.Response(status=400, text="body is not JSON\n")
        try:
            update = Update.de_json(data, self._app.bot) if isinstance(data, dict) else None
        except (KeyError, TypeError, ValueError, AttributeError):
            update = None
        if update is None:
            return web.Response(status=400, text="body is not a Telegram update\n")
        try:
            stored = await self._take(update.to_dict())
        except IntakeUnavailable:
            stored = False
        if not stored:  # Telegram delivers it again later
            return web.Response(status=503, text="not stored, try again\n")
        return web.Response(text="ok\n")


def _chat_of(payload: dict[str, Any]) -> object:
    """The chat an update belongs to (None for one that names none: those go one at a time)."""
    for kind in ("message", "channel_post", "edited_message", "edited_channel_post"):
        message = payload.get(kind)
        if isinstance(message, dict) and isinstance(message.get("chat"), dict):
            return message["chat"].get("id")
    query = payload.get("callback_query")
    if isinstance(query, dict) and isinstance(query.get("message"), dict):
        return _chat_of({"message": query["message"]})
    return None


def _crosses_chats(payload: dict[str, Any]) -> bool:
    """Whether an update changes what other chats' turns may use: someone leaving a group ends
    what their DM may recall from it, so later updates (a DM among them) wait for it."""
    message = payload.get("message")
    return isinstance(message, dict) and "left_chat_member" in message


class KeyedLocks:
    """One lock per key, each kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[object, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: object) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def _webhook_secret(secrets: Secrets, http: web.Application | None) -> str:
    secret = secrets.get("TELEGRAM_WEBHOOK_SECRET")
    if not secret:
        raise ConfigError(
            "telegram.mode = 'webhook' needs TELEGRAM_WEBHOOK_SECRET (1-256 characters of "
            "A-Z, a-z, 0-9, _ and -), which Telegram sends back with every update. Fix: export "
            "it, or use telegram.mode = 'polling'."
        )
    if http is None:
        raise ConfigError(
            "telegram.mode = 'webhook' needs the host's HTTP server. Fix: set [http] "
            "enabled = true, or use telegram.mode = 'polling'."
        )
    return secret
