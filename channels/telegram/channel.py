"""The Telegram channel: python-telegram-bot's Bot, run inside the host's event loop.

Updates arrive by long polling (the default, `channels.telegram.polling`) or, in webhook mode, as
POSTs to a route on the host's own HTTP port (`channels.telegram.webhook`); either way they are
taken by `channels.telegram.intake`, and nothing is confirmed to Telegram before it is stored.
The channel wires those parts, registers the command menus, and delivers through
`TelegramDeliverer`.
"""

from __future__ import annotations

import hashlib
import ssl
from collections.abc import Sequence
from typing import Any

import structlog
from aiohttp import web
from telegram import (
    Bot,
    BotCommand,
    BotCommandScope,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
)
from telegram.error import BadRequest, Forbidden, InvalidToken, TelegramError
from telegram.ext import Application
from telegram.request import HTTPXRequest

from bot.config import Secrets
from bot.errors import ChannelUnavailable, ConfigError
from bot.ports.access import Pairing
from bot.ports.approvals import Card, PressDesk
from bot.ports.history import ChatBuffer
from bot.ports.intake import TurnSink
from bot.ports.leadership import Leadership
from bot.ports.memory import Departures
from bot.replies import command_menu
from bot.turns import ReplyRoute
from channels.telegram import approvals
from channels.telegram.deliver import TelegramDeliverer
from channels.telegram.files import TelegramFiles
from channels.telegram.intake import UpdateIntake
from channels.telegram.mapping import PLATFORM, Access, BotIdentity
from channels.telegram.polling import ALLOWED_UPDATES, Poller
from channels.telegram.settings import TelegramSettings
from channels.telegram.webhook import WebhookRoute, webhook_secret

log = structlog.get_logger(__name__)

# Connections to the Bot API for sending (getUpdates has its own one). Eight carry more than
# Telegram lets a bot send (about 30 messages a second in all) at its usual 50-150 ms a request,
# and each one more costs CPU on every request: httpx looks at every pooled connection each time.
BOT_API_CONNECTIONS = 8

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
        raise unavailable(exc, settings.api_url) from None
    privacy = (
        "privacy mode off: group chatter is used as context"
        if me.can_read_all_group_messages
        else "privacy mode on: in groups it sees only messages addressed to it (for group "
        "context, BotFather /setprivacy -> Disable, then re-add the bot to the group)"
    )
    return f"@{me.username} answered getMe; {privacy}"


def unavailable(exc: TelegramError, api_url: str) -> ChannelUnavailable:
    """One line (the same for `bot doctor` and start-up) for a Bot API that cannot be used now:
    unreachable, timing out, or answering something that is not the Bot API."""
    return ChannelUnavailable(
        f"the Bot API at telegram.api_url = {api_url!r} did not answer getMe "
        f"({type(exc).__name__}: {exc.message}). Fix: check the network and telegram.api_url "
        "(it must end in /bot)."
    )


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
        pairing: Pairing | None = None,
    ) -> None:
        """`tls`: the TLS client context for the Bot API (shared with the other HTTPS clients);
        None builds PTB's own (one per HTTP client). `schedules`: schedules from chat are on, so
        the command menus offer /schedules."""
        token = secrets.get("TELEGRAM_BOT_TOKEN")
        if not token:
            raise ConfigError(_NO_TOKEN)
        self._settings = settings
        self._schedules = schedules
        # No Updater: our own loop polls (`channels.telegram.polling`); updates never queue in PTB.
        builder = (
            Application.builder()
            .token(token)
            .base_url(settings.api_url)
            .base_file_url(settings.files_base)
        )
        # PTB's two clients, each with a small pool (see BOT_API_CONNECTIONS); a request waits
        # for a free connection rather than failing.
        verify = {} if tls is None else {"verify": tls}
        builder = builder.request(
            HTTPXRequest(BOT_API_CONNECTIONS, pool_timeout=None, httpx_kwargs=verify)
        ).get_updates_request(HTTPXRequest(1, httpx_kwargs=verify))
        self._app = builder.updater(None).build()
        self.deliverer = TelegramDeliverer(
            self._app.bot,
            stream=settings.stream,
            stream_interval=settings.stream_interval,
            group_stream_interval=settings.group_stream_interval,
        )
        self.files = TelegramFiles(self._app.bot, token, settings.files_base)
        self._intake = UpdateIntake(
            self._app.bot,
            buffer,
            Access(
                frozenset(settings.allowed_chat_ids),
                frozenset(settings.allowed_user_ids),
                pairing=pairing is not None,
            ),
            # Keys the pseudonymous surface ids of private chats; derived from the token (a
            # secret that is stable across restarts), so the same DM keeps its id and memory
            # scope.
            dm_key=hashlib.sha256(b"telegram-dm-surface\0" + token.encode()).digest(),
            group_buffer=settings.group_buffer,
            departures=departures,
            pairing=pairing,
        )
        self._poller = Poller(
            self._app.bot, self._intake.take, timeout=settings.poll_timeout, leader=leader
        )
        self._webhook: WebhookRoute | None = None
        if settings.mode == "webhook":
            secret = webhook_secret(secrets, http)
            self._webhook = WebhookRoute(
                secret, self._app.bot, self._intake.take, running=lambda: self._app.running
            )
            assert http is not None
            http.router.add_post(settings.webhook_path, self._webhook.on_post)

    def use_approvals(self, desk: PressDesk) -> None:
        self._intake.use(desk)

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        return await approvals.post_card(self._app.bot, route, card)

    async def post_private(
        self, route: ReplyRoute, card: Card, approvers: Sequence[str]
    ) -> dict[str, Any]:
        return await approvals.post_private(self._app.bot, route, card, approvers)

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        await approvals.close_card(self._app.bot, where, text)

    @property
    def connected(self) -> bool:
        """For /healthz: started, and (when polling) the polling loop is running."""
        return self._app.running and (self._settings.mode == "webhook" or self._poller.running)

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        try:
            await self._start(sink, intake)
        except BaseException as exc:
            await self.stop()  # nothing half-started stays behind (HTTP clients, tasks)
            # Unreachable, timed out or garbage (not an answer of the Bot API itself): the
            # host tries again later.
            if isinstance(exc, TelegramError) and not isinstance(
                exc, BadRequest | Forbidden | InvalidToken
            ):
                raise unavailable(exc, self._settings.api_url) from None
            raise
        log.info("telegram_started", mode=self._settings.mode, bot=self._app.bot.username)

    async def _start(self, sink: TurnSink, intake: bool) -> None:
        try:
            await self._app.initialize()  # getMe: who the bot is, for mentions and replies
        except InvalidToken:
            # PTB's own message quotes the token; this one does not.
            raise ConfigError(_REFUSED_TOKEN) from None
        bot = self._app.bot
        self._intake.ready(sink, BotIdentity(bot.id, bot.username))
        if not intake:
            return  # ready to deliver; polling or a webhook change would take a host's updates
        await self._app.start()
        if self._settings.mode == "polling":
            await self._poller.start()
        elif self._settings.webhook_url and self._webhook is not None:
            await bot.set_webhook(
                url=self._settings.webhook_url,
                secret_token=self._webhook.secret,
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

    async def stop(self) -> None:
        """Stop polling (confirming what was stored), then the Application."""
        await self._poller.stop()
        if self._app.running:
            await self._app.stop()
        await self._app.shutdown()
        # After a failed initialize (a refused token) the Application shuts nothing down; the
        # bot's own HTTP clients were opened for getMe all the same.
        await self._app.bot.shutdown()
        await self.files.aclose()
