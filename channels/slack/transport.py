"""How Slack reaches the channel: slack-bolt's async app, over Socket Mode or the host's HTTP port.

Bolt runs our listeners before it acknowledges (`process_before_response`), so a listener decides
whether an event is acknowledged. Event types without a handler of ours are acknowledged, never
left to bolt's 404, which Slack would retry; so is a request no listener matches (an interactive
payload nobody asked for, `app_rate_limited`) once it passed the signature check.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import ConfigError
from channels.slack.api import auth_test, error_code, slack_error, unavailable
from channels.slack.settings import SlackSettings

log = structlog.get_logger(__name__)

_BOLT_LOG = logging.getLogger("channels.slack.bolt")


class _ClientChosen(logging.Filter):
    """bolt's AsyncApp reads SLACK_BOT_TOKEN from the environment even when it is given a
    client, and then warns on every start that the token will be unused. The client is ours on
    purpose (its base URL, retries, the same token), and no argument stops bolt reading the
    environment, so exactly that warning is dropped: a normal start logs none."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


_BOLT_LOG.addFilter(_ClientChosen())


class SlackTransport:
    """The bolt app and the connection it listens on; the channel's collaborators register their
    listeners on `app`, and every other event type is acknowledged."""

    def __init__(
        self,
        client: AsyncWebClient,
        settings: SlackSettings,
        *,
        signing_secret: str,
        app_token: str,
        taking: Callable[[], bool],
    ) -> None:
        """`taking`: whether the channel takes events now (started, not stopping)."""
        self._client = client
        self._settings = settings
        self._app_token = app_token
        self._taking = taking
        self.app = AsyncApp(
            client=client,
            signing_secret=signing_secret,
            name="bot.slack",
            logger=_BOLT_LOG,
            request_verification_enabled=settings.mode == "http",
            process_before_response=True,
            raise_error_for_unhandled_request=True,
        )
        self.app.error(_on_error)
        self._socket: AsyncSocketModeHandler | None = None

    def acknowledge_the_rest(self) -> None:
        """Acknowledge every event type no listener took (registered after all of them)."""
        self.app.event(re.compile(".*"))(_acknowledge)

    @property
    def connected(self) -> bool:
        """Taking events over HTTP, or the Socket Mode link is up."""
        if self._socket is None:
            return self._settings.mode == "http"
        client = self._socket.client
        session = getattr(client, "current_session", None)
        return not client.closed and session is not None and not session.closed

    async def check_bot_token(self) -> None:
        """auth.test with the bot token: a refused token is one clear ConfigError at start-up;
        an unreachable Slack (or one answering garbage) a ChannelUnavailable, tried again."""
        await auth_test(self._client, self._settings.api_url)

    async def connect_socket(self) -> None:
        # The SDK retries a refused connection forever; asking for the socket URL ourselves
        # first turns a wrong app token into one clear error at start-up.
        try:
            opened = await self._client.apps_connections_open(app_token=self._app_token)
        except Exception as exc:
            if slack_error(exc) is None:
                raise unavailable(exc, self._settings.api_url) from None
            raise ConfigError(
                f"Slack refused SLACK_APP_TOKEN ({error_code(exc)}). Fix: set "
                "SLACK_APP_TOKEN to the app-level token (xapp-…) with the connections:write "
                "scope, and turn Socket Mode on in the app settings."
            ) from None
        self._socket = AsyncSocketModeHandler(self.app, self._app_token)
        self._socket.client.wss_uri = str(opened["url"])
        await self._socket.connect_async()  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None

    async def on_http(self, request: web.Request) -> web.StreamResponse:
        """An Events API or interactivity POST (HTTP mode), checked and dispatched by bolt."""
        if not self._taking():
            # Not started yet (or stopping): Slack retries later, so nothing is lost.
            return web.json_response({"ok": False, "error": "not_ready"}, status=503)
        response = await self.app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)


async def _acknowledge() -> None:
    """An event type we do not handle: acknowledged (bolt would answer 404, and Slack retry)."""


async def _on_error(error: Exception, body: dict[str, Any]) -> BoltResponse | None:
    """Bolt's error hook. A request no listener matches (`app_rate_limited`, an interactive
    payload, an event callback without an event) passed the signature check, so it is
    acknowledged like an unhandled event type; any other failure is logged as bolt's own handler
    logs it and keeps bolt's 500."""
    if isinstance(error, BoltUnhandledRequestError):
        log.debug("slack_request_unhandled", type=body.get("type") if body else None)
        return BoltResponse(status=200, body="")
    _BOLT_LOG.error("Failed to run listener function (error: %s)", error, exc_info=error)
    return None
