"""Slash commands answered: each host command's slash command registered with bolt, acknowledged
at once (Slack wants it within 3 s), answered privately in the background (`Host.command`: no
model call, nothing in history). What a payload means is `channels.slack.commands` (pure).

The answer goes through the command's response_url when it is one under `slack.hooks_url`
(Slack's), else as an ephemeral message only the person sees.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import structlog
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.errors import IntakeUnavailable
from bot.ports.intake import TurnSink
from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.background import Background
from channels.slack.commands import SlashCommand, command_request, read_command
from channels.slack.events import Skip
from channels.slack.intake import INBOX_SOURCE
from channels.slack.mrkdwn import to_mrkdwn
from channels.slack.settings import SlackSettings

log = structlog.get_logger(__name__)

HOOKS_FIX = (
    "Fix: slash command answers go only to response URLs under slack.hooks_url (Slack's "
    "https://hooks.slack.com/); set it to your Slack's hooks origin (GovSlack, a proxy)."
)


class SlashCommands:
    """The listener for every slash command `[slack] commands` names."""

    def __init__(
        self,
        settings: SlackSettings,
        client: AsyncWebClient,
        sink: Callable[[], TurnSink | None],
        background: Background,
    ) -> None:
        """`sink`: who answers the commands now (None before start and while stopping)."""
        self._settings = settings
        self._client = client
        self._sink = sink
        self._background = background

    def attach(self, app: AsyncApp) -> None:
        for slash in self._settings.commands.slashes():
            app.command(slash)(self._on_command)

    async def _on_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        command = read_command(body, self._settings.commands)
        if isinstance(command, Skip):
            log.info("slack_command_skipped", reason=command.reason)
            return
        self._background.run(self._answer(command))

    async def _answer(self, command: SlashCommand) -> None:
        channels, users = self._settings.allowed_channel_ids, self._settings.allowed_user_ids
        if (channels and command.channel not in channels) or (users and command.user not in users):
            log.warning("slack_event_not_allowed", reason="command", user=command.user)
            return
        sink = self._sink()
        if sink is None:
            return
        try:  # a redelivered or replayed command is answered once (`/forget 1` forgets one)
            first = await sink.note(source=INBOX_SOURCE, marks=[f"command:{command.request_id}"])
        except IntakeUnavailable:
            first = True  # the store is away: the command's own reads fail clearly anyway
        if not first:
            log.warning("slack_command_repeated", command=command.name)
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
