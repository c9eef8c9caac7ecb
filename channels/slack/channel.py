"""The Slack channel: Slack's events in (Socket Mode by default, or the host's HTTP port), answers
out through the deliverer, and the names a stored turn still needs looked up when it runs.

The channel wires small parts, each with one job: `SlackTransport` (bolt's app and the connection),
`MessageIntake` (mentions, DMs, departures and the assistant pane's events, stored before the
ack), `SlashCommands` (a new slash command is registered there), `ApprovalButtons` (presses on
approval cards), `SessionEvents` (agent messaging's stop button and Messages tab), and
`SlackDirectory` (the Web API lookups behind a turn's `Lookups`).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Secrets
from bot.errors import ConfigError
from bot.ports.access import Pairing
from bot.ports.approvals import Card, PressDesk
from bot.ports.intake import TurnSink
from bot.ports.memory import Departures
from bot.turns import Lookups, Names, ReplyRoute
from channels.slack import approvals, events
from channels.slack.approvals import ApprovalButtons
from channels.slack.assistant import AssistantPane
from channels.slack.background import Background
from channels.slack.deliver import SlackDeliverer
from channels.slack.directory import SlackDirectory
from channels.slack.files import SlackFiles
from channels.slack.intake import MessageIntake
from channels.slack.pairing import Pairs
from channels.slack.sessions import AgentSessions, SessionEvents
from channels.slack.settings import SlackSettings
from channels.slack.slash import SlashCommands
from channels.slack.transport import SlackTransport

log = structlog.get_logger(__name__)

EVENTS_PATH = "/slack/events"
STOP_GRACE = 10.0  # seconds stop() waits for events already being taken in


class SlackChannel:
    """The Slack implementation of `bot.ports.intake.Channel`."""

    name = events.PLATFORM

    def __init__(
        self,
        settings: SlackSettings,
        secrets: Secrets,
        http: web.Application | None = None,
        *,
        departures: Departures | None = None,
        tls: ssl.SSLContext | None = None,
        pairing: Pairing | None = None,
    ) -> None:
        """`tls`: the TLS client context for the Web API and Socket Mode (shared with the other
        HTTPS clients); None uses aiohttp's default. `pairing`: people admitted by code, and
        codes for unknown people in DMs (`[access] unknown = "pair"`)."""
        self._settings = settings
        app_token = _require_tokens(settings, secrets, http)
        token = secrets.get("SLACK_BOT_TOKEN") or ""
        self._client = AsyncWebClient(token=token, base_url=api_base(settings.api_url), ssl=tls)
        pane = AssistantPane(self._client)
        agent = settings.messaging == "agent"
        sessions = AgentSessions(self._client, pane) if agent else None
        self.deliverer = SlackDeliverer(
            self._client,
            reaction=settings.progress_reaction,
            status=settings.assistant_status,
            assistant=pane,
            sessions=sessions,
            stream=settings.stream,
            stream_interval=settings.stream_interval,
        )
        self.files = SlackFiles(token, settings.files_url)
        self._directory = SlackDirectory(
            self._client,
            cache_seconds=settings.user_cache_seconds,
            resolve_channel_names=settings.resolve_channel_names,
        )
        self._sink: TurnSink | None = None
        self._background = Background()
        self._link = SlackTransport(
            self._client,
            settings,
            signing_secret=secrets.get("SLACK_SIGNING_SECRET") or "",
            app_token=app_token,
            taking=lambda: self._sink is not None,
        )
        self._intake = MessageIntake(
            settings,
            self._current_sink,
            pane,
            self._background,
            departures=departures,
            pairing=Pairs(pairing, self._client) if pairing is not None else None,
        )
        self._intake.attach(self._link.app)
        if agent:
            SessionEvents(settings, self._current_sink, pane, self._background).attach(
                self._link.app
            )
        SlashCommands(settings, self._client, self._current_sink, self._background).attach(
            self._link.app
        )
        self._buttons = ApprovalButtons(
            settings, self._client, self._current_sink, self._background
        )
        self._buttons.attach(self._link.app)
        self._link.acknowledge_the_rest()
        if settings.mode == "http" and http is not None:
            http.router.add_post(EVENTS_PATH, self._link.on_http)

    def _current_sink(self) -> TurnSink | None:
        return self._sink

    @property
    def connected(self) -> bool:
        """For /healthz: taking events (HTTP mode), or the Socket Mode link is up."""
        return self._sink is not None and self._link.connected

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        self._client.session = aiohttp.ClientSession()
        try:
            await self._link.check_bot_token()
            if intake and self._settings.mode == "socket":
                await self._link.connect_socket()
        except BaseException:  # refused, unavailable (tried again later) or cancelled
            await self.stop()  # nothing half-started stays behind (its HTTP session)
            raise
        if not intake:
            log.info("slack_ready_to_deliver")
            return
        self._sink = sink
        log.info("slack_started", mode=self._settings.mode)

    async def stop(self) -> None:
        self._sink = None
        await self._link.close()
        await self.drain(STOP_GRACE)
        await self._background.wait(STOP_GRACE)
        await self.deliverer.aclose()
        await self.files.aclose()
        session, self._client.session = self._client.session, None
        if session is not None:
            await session.close()

    async def drain(self, within: float | None = None) -> None:
        """Wait until every event already acknowledged has been submitted or dropped."""
        await self._intake.drain(within)

    async def look_up(self, lookups: Lookups) -> Names:
        """The names a stored request's turn needs, looked up now (see `channels.slack.intake`).
        Each lookup degrades rather than fails; if looking up fails anyway, the host answers the
        stored request as it is."""
        return await self._directory.names(lookups)

    # --- approval cards (SPEC §14) -----------------------------------------------------------

    def use_approvals(self, desk: PressDesk) -> None:
        self._buttons.use(desk)

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        return await approvals.post_card(self._client, route, card)

    async def post_private(
        self, route: ReplyRoute, card: Card, approvers: Sequence[str]
    ) -> dict[str, Any]:
        return await approvals.post_private(self._client, route, card, approvers)

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        await approvals.close_card(self._client, where, text)


def api_base(url: str) -> str:
    """The Web API base URL with the trailing slash slack-sdk needs to append method names."""
    return url if url.endswith("/") else url + "/"


def _require_tokens(settings: SlackSettings, secrets: Secrets, http: web.Application | None) -> str:
    """Check the secrets this mode needs; return the app token (empty in HTTP mode)."""
    if not secrets.get("SLACK_BOT_TOKEN"):
        raise ConfigError(
            "slack.enabled = true but SLACK_BOT_TOKEN is not set. Fix: export the app's bot token "
            "(xoxb-…, under OAuth & Permissions) as SLACK_BOT_TOKEN or put it in .env."
        )
    if settings.mode == "socket":
        token = secrets.get("SLACK_APP_TOKEN")
        if not token:
            raise ConfigError(
                "slack.mode = 'socket' but SLACK_APP_TOKEN is not set. Fix: create an app-level "
                "token (xapp-…) with connections:write under Basic Information and export it as "
                "SLACK_APP_TOKEN, or set slack.mode = 'http'."
            )
        return token
    if not secrets.get("SLACK_SIGNING_SECRET"):
        raise ConfigError(
            "slack.mode = 'http' but SLACK_SIGNING_SECRET is not set. Fix: export the app's "
            "signing secret (Basic Information) as SLACK_SIGNING_SECRET."
        )
    if http is None:
        raise ConfigError(
            "slack.mode = 'http' needs the host's HTTP server. Fix: set http.enabled = true "
            f"(Slack then posts events to {EVENTS_PATH} on the [http] port), or use "
            "slack.mode = 'socket'."
        )
    return ""
