"""Telegram's webhook mode: updates POSTed to a route on the host's own HTTP port, checked against
`TELEGRAM_WEBHOOK_SECRET`, answered 200 only once stored (503 otherwise: Telegram delivers the
update again)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable

import structlog
from aiohttp import web
from telegram import Bot, Update

from bot.config import Secrets
from bot.errors import ConfigError, IntakeUnavailable
from channels.telegram.polling import Take

log = structlog.get_logger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookRoute:
    """The route's handler: the secret checked, the body read as an update, the update taken."""

    def __init__(self, secret: str, bot: Bot, take: Take, *, running: Callable[[], bool]) -> None:
        """`running`: whether the channel takes updates now."""
        self.secret = secret
        self._bot = bot
        self._take = take
        self._running = running

    async def on_post(self, request: web.Request) -> web.Response:
        secret = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(secret.encode(), self.secret.encode()):
            log.warning("telegram_webhook_forbidden", remote=request.remote)
            return web.Response(status=401, text="wrong or missing secret token\n")
        if not self._running():
            return web.Response(status=503, text="not started\n")
        try:
            data = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.Response(status=400, text="body is not JSON\n")
        try:
            update = Update.de_json(data, self._bot) if isinstance(data, dict) else None
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


def webhook_secret(secrets: Secrets, http: web.Application | None) -> str:
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
