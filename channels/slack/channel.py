"""The Slack channel: slack-bolt's async app in Socket Mode (default) or on the host's HTTP port,
turning mentions and DMs into TurnRequests for the host.

Bolt runs our listener before it acknowledges (`process_before_response`): the listener checks
the allowlists and submits the request to the host, which stores it in the durable inbox under two
dedupe marks (the event id, and the message itself, because a mention in a DM or group can arrive
as both `message` and `app_mention`). Only then is the event acknowledged (the HTTP 200, the
Socket Mode ack). When it cannot be stored (the host is shutting down, the store cannot write) the
listener answers 503: no Socket Mode ack, an HTTP 503, and Slack delivers the event again. Nothing
before the ack calls the Web API, so a slow Slack API never makes the ack miss Slack's 3 s
deadline: the speaker's and surface's names and the preceding messages are looked up when the
turn runs (`complete`), and so is the model call. Event types without a handler of ours are
acknowledged, never left to bolt's 404, which Slack would retry.

The assistant pane's own events (`assistant_thread_started`, `_context_changed`) start no turn:
they are remembered (`channels.slack.assistant`) and acknowledged, and the pane's calls they lead
to (suggested prompts, a new thread's title) run in the background after the ack. A message in an
assistant thread is a DM message in a thread, so it is its own conversation, answered in the
thread, with the thread's status as its progress sign.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Coroutine
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import aiohttp
import structlog
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.config import Secrets
from bot.errors import ConfigError, IntakeUnavailable
from bot.ports.approvals import Card, PressDesk
from bot.ports.intake import Admission, TurnSink
from bot.ports.memory import Departures
from bot.replies import APPROVAL_UNKNOWN
from bot.turns import ReplyRoute, Speaker, TurnRequest
from channels.slack import approvals, events
from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.assistant import AssistantPane, AssistantThreads
from channels.slack.commands import SlashCommand, command_request, read_command
from channels.slack.deliver import SlackDeliverer
from channels.slack.directory import SlackDirectory
from channels.slack.events import AssistantThread, BotIdentity, Skip, SlackMessage
from channels.slack.files import SlackFiles
from channels.slack.mrkdwn import to_mrkdwn
from channels.slack.sessions import STOP_EVENT, AgentSessions, read_stop
from channels.slack.settings import SlackSettings

log = structlog.get_logger(__name__)

EVENTS_PATH = "/slack/events"
_BOLT_LOG = logging.getLogger("channels.slack.bolt")


class _ClientChosen(logging.Filter):
    """bolt's AsyncApp reads SLACK_BOT_TOKEN from the environment even when it is given a
    client, and then warns on every start that the token will be unused. The client is ours on
    purpose (its base URL, retries, the same token), and no argument stops bolt reading the
    environment, so exactly that warning is dropped: a normal start logs none."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


_BOLT_LOG.addFilter(_ClientChosen())
INBOX_SOURCE = "slack"
STOP_GRACE = 10.0  # seconds stop() waits for events already being taken in
HOOKS_FIX = (
    "Fix: slash command answers go only to response URLs under slack.hooks_url (Slack's "
    "https://hooks.slack.com/); set it to your Slack's hooks origin (GovSlack, a proxy)."
)


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
    ) -> None:
        """`tls`: the TLS client context for the Web API and Socket Mode (shared with the other
        HTTPS clients); None uses aiohttp's default."""
        self._settings = settings
        self._departures = departures
        self._app_token = _require_tokens(settings, secrets, http)
        self._client = AsyncWebClient(
            token=secrets.get("SLACK_BOT_TOKEN"), base_url=api_base(settings.api_url), ssl=tls
        )
        self._pane = AssistantPane(self._client)
        self._threads = AssistantThreads()
        agent = settings.messaging == "agent"
        self._sessions = AgentSessions(self._client, self._pane) if agent else None
        self.deliverer = SlackDeliverer(
            self._client,
            reaction=settings.progress_reaction,
            status=settings.assistant_status,
            assistant=self._pane,
            sessions=self._sessions,
            stream=settings.stream,
            stream_interval=settings.stream_interval,
        )
        self.files = SlackFiles(secrets.get("SLACK_BOT_TOKEN") or "", settings.files_url)
        self._directory = SlackDirectory(
            self._client,
            cache_seconds=settings.user_cache_seconds,
            resolve_channel_names=settings.resolve_channel_names,
        )
        self._app = AsyncApp(
            client=self._client,
            signing_secret=secrets.get("SLACK_SIGNING_SECRET") or "",
            name="bot.slack",
            logger=_BOLT_LOG,
            request_verification_enabled=settings.mode == "http",
            process_before_response=True,
            raise_error_for_unhandled_request=True,
        )
        self._app.error(_on_error)
        self._app.event("app_mention")(self._on_event)
        self._app.event("message")(self._on_event)
        self._app.event("member_left_channel")(self._on_left)
        for kind in events.ASSISTANT_EVENTS:
            self._app.event(kind)(self._on_assistant)
        if agent:
            self._app.event(STOP_EVENT)(self._on_stop)
            self._app.event("app_home_opened")(self._on_home)
        for slash in settings.commands.slashes():
            self._app.command(slash)(self._on_command)
        self._app.action(approvals.ACTIONS)(self._on_action)
        self._app.event(re.compile(".*"))(_acknowledge)  # every other event type
        if settings.mode == "http" and http is not None:
            http.router.add_post(EVENTS_PATH, self._on_http)
        self._sink: TurnSink | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._intake: set[asyncio.Task[Any]] = set()
        self._aside: set[asyncio.Task[Any]] = set()  # the pane's calls, after the ack
        self._desk: PressDesk | None = None  # where presses on approval cards go

    @property
    def connected(self) -> bool:
        """For /healthz: taking events (HTTP mode), or the Socket Mode link is up."""
        if self._sink is None:
            return False
        if self._socket is None:
            return self._settings.mode == "http"
        client = self._socket.client
        session = getattr(client, "current_session", None)
        return not client.closed and session is not None and not session.closed

    async def start(self, sink: TurnSink, *, intake: bool = True) -> None:
        self._client.session = aiohttp.ClientSession()
        await self._check_bot_token()
        if not intake:
            log.info("slack_ready_to_deliver")
            return
        if self._settings.mode == "socket":
            await self._connect_socket()
        self._sink = sink
        log.info("slack_started", mode=self._settings.mode)

    async def stop(self) -> None:
        self._sink = None
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        await self.drain(STOP_GRACE)
        if self._aside:
            await asyncio.wait(set(self._aside), timeout=STOP_GRACE)
        await self.deliverer.aclose()
        await self.files.aclose()
        session, self._client.session = self._client.session, None
        if session is not None:
            await session.close()

    async def drain(self, within: float | None = None) -> None:
        """Wait until every event already acknowledged has been submitted or dropped."""
        while self._intake:
            _, pending = await asyncio.wait(set(self._intake), timeout=within)
            if pending:
                log.warning("slack_intake_unfinished", events=len(pending))
                return

    async def _connect_socket(self) -> None:
        # The SDK retries a refused connection forever; asking for the socket URL ourselves
        # first turns a wrong app token into one clear error at start-up.
        try:
            opened = await self._client.apps_connections_open(app_token=self._app_token)
        except SlackApiError as exc:
            await self.stop()
            raise ConfigError(
                f"Slack refused SLACK_APP_TOKEN ({error_code(exc)}). Fix: set "
                "SLACK_APP_TOKEN to the app-level token (xapp-…) with the connections:write "
                "scope, and turn Socket Mode on in the app settings."
            ) from None
        self._socket = AsyncSocketModeHandler(self._app, self._app_token)
        self._socket.client.wss_uri = str(opened["url"])
        await self._socket.connect_async()  # type: ignore[no-untyped-call]

    async def _check_bot_token(self) -> None:
        try:
            await self._client.auth_test()
        except SlackApiError as exc:
            await self.stop()
            raise ConfigError(
                f"Slack refused SLACK_BOT_TOKEN ({error_code(exc)}) at "
                f"{self._settings.api_url}. Fix: set SLACK_BOT_TOKEN to the bot token (xoxb-…) "
                "of the installed app, and check slack.api_url."
            ) from None
        except CALL_ERRORS as exc:
            await self.stop()
            raise ConfigError(
                f"cannot reach Slack at slack.api_url = {self._settings.api_url!r} "
                f"({type(exc).__name__}). Fix: check the network or slack.api_url."
            ) from None

    # --- intake ---------------------------------------------------------------------------------

    async def _on_http(self, request: web.Request) -> web.StreamResponse:
        if self._sink is None:
            # Not started yet (or stopping): Slack retries later, so nothing is lost.
            return web.json_response({"ok": False, "error": "not_ready"}, status=503)
        response = await self._app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    async def _on_event(
        self, body: dict[str, Any], context: AsyncBoltContext
    ) -> BoltResponse | None:
        """Bolt runs this before the ack; a response of ours other than None means no ack."""
        task = asyncio.current_task()
        if task is not None:
            self._intake.add(task)
            task.add_done_callback(self._intake.discard)
        try:
            stored = await self._take(body, BotIdentity(context.bot_user_id, context.bot_id))
        except Exception:  # a bad event is logged and acknowledged: a retry would fail alike
            log.exception("slack_intake_failed", event_id=body.get("event_id"))
            return None
        if stored:
            return None
        return BoltResponse(status=503, body={"ok": False, "error": "not_stored_try_again"})

    async def _on_left(self, body: dict[str, Any]) -> None:
        """Someone left a channel: their memory participation there ends."""
        departure = events.read_departure(body, datetime.now(UTC))
        if isinstance(departure, Skip):
            log.debug("slack_event_skipped", reason=departure.reason)
        elif self._departures is not None:
            await self._departures.left(departure)

    async def _on_assistant(self, body: dict[str, Any]) -> None:
        """An assistant thread was opened, or its person opened another channel beside it."""
        thread = events.read_assistant_thread(body)
        if isinstance(thread, Skip):
            log.debug("slack_event_skipped", reason=thread.reason, event_id=body.get("event_id"))
            return
        if not self._allowed_thread(thread):
            return
        if thread.event_type != "assistant_thread_started":
            self._threads.moved(thread)
            return
        self._threads.started(thread)
        prompts = [p.model_dump() for p in self._settings.assistant_prompts]
        if prompts:
            title = self._settings.assistant_prompts_title
            self._in_background(
                self._pane.suggest(thread.channel, thread.thread_ts, prompts, title)
            )

    # --- agent messaging -----------------------------------------------------------------------

    async def _on_home(self, event: dict[str, Any]) -> None:
        """Someone opened the app's Messages tab: the suggested prompts go at its top (no model
        call). Opening the Home tab (or a tab without a name) does nothing."""
        channel, user = event.get("channel"), event.get("user")
        if event.get("tab") != "messages" or not isinstance(channel, str) or not channel:
            return
        users = self._settings.allowed_user_ids
        if users and user not in users:
            log.warning("slack_event_not_allowed", reason="messages tab", user=user)
            return
        prompts = [p.model_dump() for p in self._settings.assistant_prompts]
        if prompts:
            title = self._settings.assistant_prompts_title
            self._in_background(self._pane.suggest(channel, None, prompts, title))

    async def _on_stop(self, body: dict[str, Any]) -> None:
        """Slack's stop button: the running turn of that thread's session is cancelled (its
        conversation keeps a continuity account; the session goes back to active when the turn
        has ended)."""
        stop = read_stop(body)
        if isinstance(stop, Skip):
            log.debug("slack_event_skipped", reason=stop.reason, event_id=body.get("event_id"))
            return
        users = self._settings.allowed_user_ids
        if users and stop.user not in users:
            log.warning("slack_event_not_allowed", reason="stop", user=stop.user)
            return
        sink = self._sink
        if sink is None:
            return
        try:  # a redelivered stop must not stop the thread's next turn
            first = await sink.note(source=INBOX_SOURCE, marks=[f"stop:{stop.event_id}"])
        except IntakeUnavailable:  # cannot remember it: stopping once more is the lesser harm
            first = True
        if not first:
            log.info("slack_session_stop_duplicate", event_id=stop.event_id)
            return
        key = events.session_key(stop.team, stop.channel, stop.thread_ts)
        stopped = await sink.cancel(key)
        log.info("slack_session_stop", conversation_key=key, stopped=stopped)

    # --- approval cards (SPEC §14) -----------------------------------------------------------

    def use_approvals(self, desk: PressDesk) -> None:
        self._desk = desk

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        return await approvals.post_card(self._client, route, card)

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        await approvals.close_card(self._client, where, text)

    async def _on_action(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """A press on a card's button: acknowledged at once, decided in the background; a press
        that changes nothing is answered privately."""
        await ack()
        self._in_background(self._press(body))

    async def _press(self, body: dict[str, Any]) -> None:
        press = approvals.read_press(body)
        if press is None or self._desk is None or self._sink is None:
            user, channel = body.get("user"), body.get("channel")
            if isinstance(user, dict) and isinstance(channel, dict):
                await self._privately(str(channel.get("id")), str(user.get("id")), APPROVAL_UNKNOWN)
            log.warning("slack_action_unknown")
            return
        try:  # a redelivered press is taken once
            first = await self._sink.note(source=INBOX_SOURCE, marks=[f"action:{press.trigger}"])
        except IntakeUnavailable:
            first = True  # the decision itself is taken once by the store
        if not first:
            return
        users = self._settings.allowed_user_ids
        if users and press.user not in users:
            log.warning("slack_event_not_allowed", reason="action", user=press.user)
            return
        answer = await self._desk.press(
            press.approval_id, press.approve, f"{events.PLATFORM}:{press.user}"
        )
        if not answer.changed:
            await self._privately(press.channel, press.user, answer.text)

    async def _privately(self, channel: str, user: str, text: str) -> None:
        try:
            await self._client.chat_postEphemeral(channel=channel, user=user, text=text)
        except CALL_ERRORS as exc:
            log.warning("slack_ephemeral_failed", error=error_code(exc))

    # --- slash commands ---------------------------------------------------------------------------

    async def _on_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """A slash command: acknowledged at once (Slack wants it within 3 s), answered privately
        in the background."""
        await ack()
        command = read_command(body, self._settings.commands)
        if isinstance(command, Skip):
            log.info("slack_command_skipped", reason=command.reason)
            return
        self._in_background(self._answer(command))

    async def _answer(self, command: SlashCommand) -> None:
        channels, users = self._settings.allowed_channel_ids, self._settings.allowed_user_ids
        if (channels and command.channel not in channels) or (users and command.user not in users):
            log.warning("slack_event_not_allowed", reason="command", user=command.user)
            return
        sink = self._sink
        if sink is None:
            return
        request = command_request(command, received_at=datetime.now(UTC), turn_id=uuid4().hex)
        try:
            reply = await sink.command(request)
        except Exception:  # the person gets nothing rather than a half answer; logged
            log.exception("slack_command_failed", command=command.name)
            return
        await self._reply_privately(command, to_mrkdwn(reply))
        log.info("slack_command_answered", command=command.name)

    async def _reply_privately(self, command: SlashCommand, text: str) -> None:
        """Through the command's response_url (only one under `hooks_url`: Slack's), else as an
        ephemeral message only the person sees."""
        url = command.response_url
        if url is not None and url.startswith(self._settings.hooks_url):
            try:
                answer = await AsyncWebhookClient(url, session=self._client.session).send(
                    text=text, response_type="ephemeral"
                )
            except CALL_ERRORS as exc:
                log.warning("slack_command_reply_failed", via="response_url", error=error_code(exc))
            else:
                if answer.status_code == 200:
                    return
                log.warning(
                    "slack_command_reply_failed", via="response_url", status=answer.status_code
                )
        elif url is not None:
            log.warning("slack_command_response_url_refused", fix=HOOKS_FIX)
        try:
            await self._client.chat_postEphemeral(
                channel=command.channel, user=command.user, text=text
            )
        except CALL_ERRORS as exc:
            log.warning(
                "slack_command_reply_failed", via="chat.postEphemeral", error=error_code(exc)
            )

    def _in_background(self, call: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(call)
        self._aside.add(task)
        task.add_done_callback(self._aside.discard)

    async def _take(self, body: dict[str, Any], bot: BotIdentity) -> bool:
        """Take one event; False when it could not be stored (do not acknowledge it)."""
        received_at = datetime.now(UTC)
        message = events.read_event(body, bot, ignore_other_bots=self._settings.ignore_other_bots)
        if isinstance(message, Skip):
            log.debug("slack_event_skipped", reason=message.reason, event_id=body.get("event_id"))
            return True
        sink = self._sink
        if sink is None:
            log.warning("slack_event_after_stop", event_id=message.event_id)
            return False
        if not self._allowed(message):
            return True
        if not events.plain_text(message.text, {}, bot.user_id) and not message.files:
            log.info("slack_event_skipped", reason="no text", event_id=message.event_id)
            return True
        message = self._in_assistant_thread(message)
        if self._sessions is not None:
            message = replace(message, session=True)
        request = events.pending_request(message, bot, received_at=received_at, turn_id=uuid4().hex)
        if message.session and not message.in_thread:  # its first message names the session
            request = events.with_title(request, events.thread_title(request.text))
        if (thread := message.assistant_thread) is not None:
            request = events.with_viewing(request, self._threads.viewing(message.channel, thread))
        marks = [message.event_id, events.message_key(message)]
        admission = await sink.submit(request, source=INBOX_SOURCE, marks=marks)
        log.info(
            "slack_turn_submitted",
            turn_id=request.turn_id,
            conversation_key=request.conversation_key,
            admission=admission.value,
        )
        if admission is Admission.ACCEPTED:
            self._title(message, request.text)
        return admission.acknowledge

    def _in_assistant_thread(self, message: SlackMessage) -> SlackMessage:
        """The message, also marked as written in an assistant thread when Slack did not mark it
        but its thread is one this process saw start."""
        thread = message.thread_ts
        if message.assistant or thread is None or not self._threads.known(message.channel, thread):
            return message
        return replace(message, assistant=True)

    def _title(self, message: SlackMessage, text: str) -> None:
        """A new assistant thread is named after its first message."""
        thread = message.assistant_thread
        if thread is None:
            return
        title = events.thread_title(text)
        if title is not None and self._threads.take_title(message.channel, thread):
            self._in_background(self._pane.title(message.channel, thread, title))

    def _allowed_thread(self, thread: AssistantThread) -> bool:
        channels, users = self._settings.allowed_channel_ids, self._settings.allowed_user_ids
        if (channels and thread.channel not in channels) or (users and thread.user not in users):
            log.warning("slack_event_not_allowed", reason="assistant thread", user=thread.user)
            return False
        return True

    def _allowed(self, message: SlackMessage) -> bool:
        channels, users = self._settings.allowed_channel_ids, self._settings.allowed_user_ids
        if channels and message.channel not in channels:
            log.warning("slack_event_not_allowed", reason="channel", channel=message.channel)
            return False
        if users and message.user not in users:
            log.warning("slack_event_not_allowed", reason="user", user=message.user)
            return False
        return True

    async def complete(self, request: TurnRequest) -> TurnRequest:
        """A stored request with the names and context its turn needs, looked up now (see the
        module docstring). Lookups degrade rather than fail; if completing fails anyway, the
        stored request is answered as it is."""
        pending = events.pending_lookup(request)
        if pending is None:
            return request
        message, bot = pending
        try:
            found = await self._request(message, bot, request)
        except Exception:
            log.exception("slack_lookups_failed", turn_id=request.turn_id)
            found = request
        return events.looked_up(request, found)

    async def _request(
        self, message: SlackMessage, bot: BotIdentity, stored: TurnRequest
    ) -> TurnRequest:
        viewed = events.viewed_channel(stored)
        with self._directory.one_message():
            speaker, text, info, preceding, viewed_info = await asyncio.gather(
                self._speaker(message),
                self._directory.plain(message.text, strip_user=bot.user_id),
                self._directory.conversation(message.channel),
                self._directory.preceding(message, bot),
                self._directory.conversation(viewed) if viewed else _nothing(),
            )
        kind = events.surface_kind(info, message.channel_type, message.channel)
        return events.build_request(
            message,
            text=text,
            speaker=speaker,
            surface=events.build_surface(message.channel, kind, info, speaker.handle),
            preceding=preceding,
            received_at=stored.received_at,
            turn_id=uuid4().hex,
            viewing=events.viewing(viewed, viewed_info) if viewed else None,
        )

    async def _speaker(self, message: SlackMessage) -> Speaker:
        if message.bot_name is not None:
            return Speaker(name=message.bot_name)
        return await self._directory.speaker(message.user)


async def _nothing() -> None:
    return None


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
