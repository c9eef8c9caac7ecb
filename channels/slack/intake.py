"""Slack events taken in: mentions and DMs submitted to the host before they are acknowledged,
people leaving channels, and the assistant pane's thread events.

A message's listener checks the allowlists and submits the request to the host, which stores it
in the durable inbox under two dedupe marks (the event id, and the message itself, because a
mention in a DM or group can arrive as both `message` and `app_mention`). Only then is the event
acknowledged (the HTTP 200, the Socket Mode ack). When it cannot be stored (the host is shutting
down, the store cannot write) the listener answers 503: no Socket Mode ack, an HTTP 503, and Slack
delivers the event again. Nothing before the ack calls the Web API, so a slow Slack API never
makes the ack miss Slack's 3 s deadline: names and preceding messages are looked up when the turn
runs (the request's `Lookups`).

The assistant pane's own events (`assistant_thread_started`, `_context_changed`) start no turn:
they are remembered (`AssistantThreads`) and acknowledged, and the pane's calls they lead to
(suggested prompts, a new thread's title) run in the background after the ack. A message in an
assistant thread is a DM message in a thread, so it is its own conversation, answered in the
thread, with the thread's status as its progress sign.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import structlog
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.response import BoltResponse

from bot.ports.intake import Admission, TurnSink
from bot.ports.memory import Departures
from bot.turns import Origin
from channels.slack import events
from channels.slack.assistant import (
    ASSISTANT_EVENTS,
    AssistantPane,
    AssistantThread,
    AssistantThreads,
    read_assistant_thread,
    thread_title,
)
from channels.slack.background import Background
from channels.slack.events import BotIdentity, Skip, SlackMessage
from channels.slack.names import plain_text
from channels.slack.pairing import Pairs
from channels.slack.settings import SlackSettings

log = structlog.get_logger(__name__)

INBOX_SOURCE = "slack"


class MessageIntake:
    """The listeners that take messages, departures and assistant thread events."""

    def __init__(
        self,
        settings: SlackSettings,
        sink: Callable[[], TurnSink | None],
        pane: AssistantPane,
        background: Background,
        *,
        departures: Departures | None,
        pairing: Pairs | None = None,
    ) -> None:
        """`sink`: where turns go now (None before start and while stopping); `pairing`: the
        people admitted by code (and codes for the unknown), when pairing is on."""
        self._settings = settings
        self._sink = sink
        self._pane = pane
        self._background = background
        self._departures = departures
        self._pairing = pairing
        self._threads = AssistantThreads()
        self._taking: set[asyncio.Task[Any]] = set()

    def attach(self, app: AsyncApp) -> None:
        app.event("app_mention")(self._on_event)
        app.event("message")(self._on_event)
        app.event("member_left_channel")(self._on_left)
        for kind in ASSISTANT_EVENTS:
            app.event(kind)(self._on_assistant)

    async def drain(self, within: float | None = None) -> None:
        """Wait until every event already acknowledged has been submitted or dropped."""
        while self._taking:
            _, pending = await asyncio.wait(set(self._taking), timeout=within)
            if pending:
                log.warning("slack_intake_unfinished", events=len(pending))
                return

    async def _on_event(
        self, body: dict[str, Any], context: AsyncBoltContext
    ) -> BoltResponse | None:
        """Bolt runs this before the ack; a response of ours other than None means no ack."""
        task = asyncio.current_task()
        if task is not None:
            self._taking.add(task)
            task.add_done_callback(self._taking.discard)
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
        thread = read_assistant_thread(body)
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
            self._background.run(
                self._pane.suggest(thread.channel, thread.thread_ts, prompts, title)
            )

    async def _take(self, body: dict[str, Any], bot: BotIdentity) -> bool:
        """Take one event; False when it could not be stored (do not acknowledge it)."""
        received_at = datetime.now(UTC)
        message = events.read_event(body, bot, ignore_other_bots=self._settings.ignore_other_bots)
        if isinstance(message, Skip):
            log.debug("slack_event_skipped", reason=message.reason, event_id=body.get("event_id"))
            return True
        sink = self._sink()
        if sink is None:
            log.warning("slack_event_after_stop", event_id=message.event_id)
            return False
        if not await self._known(message, sink):
            return True
        if not plain_text(message.text, {}, bot.user_id) and not message.files:
            log.info("slack_event_skipped", reason="no text", event_id=message.event_id)
            return True
        message = self._in_assistant_thread(message)
        if self._settings.messaging == "agent":
            message = replace(message, session=True)
        thread = message.assistant_thread
        request = events.pending_request(
            message,
            bot,
            received_at=received_at,
            turn_id=uuid4().hex,
            viewing=self._threads.viewing(message.channel, thread) if thread else None,
        )
        request = replace(request, origin=self._origin(message))
        if message.session and not message.in_thread:  # its first message names the session
            request = events.with_title(request, thread_title(request.text))
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
        title = thread_title(text)
        if title is not None and self._threads.take_title(message.channel, thread):
            self._background.run(self._pane.title(message.channel, thread, title))

    def _allowed_thread(self, thread: AssistantThread) -> bool:
        channels, users = self._settings.allowed_channel_ids, self._settings.allowed_user_ids
        if (channels and thread.channel not in channels) or (users and thread.user not in users):
            log.warning("slack_event_not_allowed", reason="assistant thread", user=thread.user)
            return False
        return True

    def _origin(self, message: SlackMessage) -> Origin:
        """Who wrote it, as Slack says: another bot, a person the allowlist names (only those
        get here when there is one), or a person no allowlist names."""
        if message.bot_name is not None:
            return Origin.BOT
        return Origin.PERSON if self._settings.allowed_user_ids else Origin.UNLISTED

    async def _known(self, message: SlackMessage, sink: TurnSink) -> bool:
        """On the allowlists or, with pairing, admitted by code. An unknown person writing in a
        DM is offered a code (once per message: its marks are noted first)."""
        pairing = self._pairing
        users = self._settings.allowed_user_ids
        if pairing is None or (users and message.user in users) or message.bot_name is not None:
            return self._allowed(message)
        channels = self._settings.allowed_channel_ids
        if channels and message.channel not in channels:
            return self._allowed(message)
        person = events.person_for(message)
        if await pairing.admitted(person):
            return True
        marks = [message.event_id, events.message_key(message)]
        if message.is_dm and await sink.note(source=INBOX_SOURCE, marks=marks):
            self._background.run(pairing.offer(person, message.channel, message.user))
        log.info("slack_event_not_allowed", reason="unknown person", user=message.user)
        return False

    def _allowed(self, message: SlackMessage) -> bool:
        channels, users = self._settings.allowed_channel_ids, self._settings.allowed_user_ids
        if channels and message.channel not in channels:
            log.warning("slack_event_not_allowed", reason="channel", channel=message.channel)
            return False
        if users and message.user not in users:
            log.warning("slack_event_not_allowed", reason="user", user=message.user)
            return False
        return True
