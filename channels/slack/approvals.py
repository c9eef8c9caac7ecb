"""Approval cards on Slack (SPEC §14): a Block Kit message with Approve and Deny buttons, its
update once decided, and the presses (`block_actions`, over Socket Mode or signed HTTP like
events): acknowledged at once, taken once, decided by the host's `PressDesk` in the background; a
press that changes nothing is answered privately.

A button's `action_id` says approve or deny and its `value` is the opaque approval id, nothing
more. Every text is escaped for mrkdwn (`&`, `<`, `>`), so an argument cannot mention anyone,
open a link or post a channel-wide ping. While the card waits, the message that asked carries a
reaction (the conversation's sign that it waits), taken down when the card is closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import IntakeUnavailable
from bot.ports.approvals import Card, PressDesk
from bot.ports.intake import TurnSink
from bot.replies import APPROVAL_UNKNOWN
from bot.turns import ReplyRoute
from channels.slack.api import CALL_ERRORS, error_code
from channels.slack.background import Background
from channels.slack.events import PLATFORM
from channels.slack.intake import INBOX_SOURCE
from channels.slack.settings import SlackSettings

log = structlog.get_logger(__name__)

APPROVE_ACTION = "approval_approve"
DENY_ACTION = "approval_deny"
ACTIONS = re.compile(rf"^({APPROVE_ACTION}|{DENY_ACTION})$")
_ID = re.compile(r"[A-Za-z0-9_-]{16,32}")
MAX_SECTION = 2900  # a section's text may hold 3,000 characters
# Not the working sign's reaction (hourglass_flowing_sand by default): the asking turn takes that
# one down when its answer shows, while this one stays until the card is decided.
WAITING_REACTION = "hourglass"


def escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass(frozen=True, slots=True)
class Press:
    """One press on a card's button, as Slack sent it."""

    approval_id: str
    approve: bool
    user: str
    channel: str
    trigger: str


def read_press(body: object) -> Press | None:
    """The press a `block_actions` payload carries; None for anything that is not one of ours."""
    if not isinstance(body, dict):
        return None
    actions, user, channel = body.get("actions"), body.get("user"), body.get("channel")
    if not (isinstance(actions, list) and len(actions) == 1 and isinstance(actions[0], dict)):
        return None
    action = actions[0]
    action_id, value = action.get("action_id"), action.get("value")
    if action_id not in (APPROVE_ACTION, DENY_ACTION):
        return None
    if not (isinstance(value, str) and _ID.fullmatch(value)):
        return None
    if not (isinstance(user, dict) and isinstance(user.get("id"), str)):
        return None
    if not (isinstance(channel, dict) and isinstance(channel.get("id"), str)):
        return None
    trigger = body.get("trigger_id") or action.get("action_ts") or ""
    return Press(value, action_id == APPROVE_ACTION, user["id"], channel["id"], str(trigger))


def card_blocks(card: Card) -> list[dict[str, Any]]:
    return [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": escaped(card.text)[:MAX_SECTION]},
        },
        {
            "type": "actions",
            "block_id": "approval",
            "elements": [
                {
                    "type": "button",
                    "action_id": APPROVE_ACTION,
                    "text": {"type": "plain_text", "text": card.approve_label},
                    "style": "primary",
                    "value": card.approval_id,
                },
                {
                    "type": "button",
                    "action_id": DENY_ACTION,
                    "text": {"type": "plain_text", "text": card.deny_label},
                    "style": "danger",
                    "value": card.approval_id,
                },
            ],
        },
    ]


async def post_card(client: AsyncWebClient, route: ReplyRoute, card: Card) -> dict[str, Any]:
    channel = str(route.values.get("channel"))
    thread = route.values.get("thread_ts")
    answer = await client.chat_postMessage(
        channel=channel,
        text=escaped(card.text)[:MAX_SECTION],
        blocks=card_blocks(card),
        thread_ts=thread if isinstance(thread, str) else None,
    )
    where = {"channel": channel, "ts": str(answer["ts"])}
    asked = route.values.get("message_ts")
    if isinstance(asked, str) and await _react(client, "reactions_add", channel, asked):
        where["waits"] = asked  # the message that shows the conversation waits
    return where


async def post_private(
    client: AsyncWebClient, route: ReplyRoute, card: Card, approvers: Sequence[str]
) -> dict[str, Any]:
    """The card in a DM with each approver (conversations.open, then chat.postMessage), and one
    line in the conversation; with no approver reachable, the card without its arguments there."""
    private = []
    for approver in approvers:
        platform, _, user = approver.partition(":")
        if platform != PLATFORM:
            continue
        try:
            opened = await client.conversations_open(users=user)
            channel = str(opened["channel"]["id"])
            sent = await client.chat_postMessage(
                channel=channel, text=escaped(card.text)[:MAX_SECTION], blocks=card_blocks(card)
            )
        except CALL_ERRORS as exc:
            log.warning("slack_private_card_failed", error=error_code(exc))
            continue
        private.append({"channel": channel, "ts": str(sent["ts"])})
    if not private:
        return await post_card(client, route, replace(card, text=card.hidden_text))
    where = await _post_line(client, route, card.notice)
    return {**where, "private": private}


async def _post_line(client: AsyncWebClient, route: ReplyRoute, text: str) -> dict[str, Any]:
    """One line in the conversation (no buttons), and the waiting sign on the asking message."""
    channel = str(route.values.get("channel"))
    thread = route.values.get("thread_ts")
    answer = await client.chat_postMessage(
        channel=channel,
        text=escaped(text)[:MAX_SECTION],
        thread_ts=thread if isinstance(thread, str) else None,
    )
    where = {"channel": channel, "ts": str(answer["ts"])}
    asked = route.values.get("message_ts")
    if isinstance(asked, str) and await _react(client, "reactions_add", channel, asked):
        where["waits"] = asked
    return where


async def close_card(client: AsyncWebClient, where: dict[str, Any], text: str) -> None:
    shown = escaped(text)[:MAX_SECTION]
    for card in [where, *where.get("private", ())]:
        try:
            await client.chat_update(
                channel=card["channel"],
                ts=card["ts"],
                text=shown,
                blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": shown}}],
            )
        except CALL_ERRORS as exc:  # the others are closed all the same
            log.warning("slack_card_update_failed", error=error_code(exc))
    waits = where.get("waits")
    if isinstance(waits, str):
        await _react(client, "reactions_remove", where["channel"], waits)


async def _react(client: AsyncWebClient, method: str, channel: str, ts: str) -> bool:
    """The waiting sign, added or removed; a sign is never worth failing the card (a second
    removal, after a card was closed twice, is refused by Slack and ignored here)."""
    try:
        await getattr(client, method)(channel=channel, timestamp=ts, name=WAITING_REACTION)
    except CALL_ERRORS as exc:
        log.info("slack_reaction_failed", method=method.replace("_", "."), error=error_code(exc))
        return False
    return True


class ApprovalButtons:
    """The listener for presses on approval cards; `use` names the desk that decides them."""

    def __init__(
        self,
        settings: SlackSettings,
        client: AsyncWebClient,
        sink: Callable[[], TurnSink | None],
        background: Background,
    ) -> None:
        """`sink`: where presses are noted once (None before start and while stopping)."""
        self._settings = settings
        self._client = client
        self._sink = sink
        self._background = background
        self._desk: PressDesk | None = None

    def use(self, desk: PressDesk) -> None:
        self._desk = desk

    def attach(self, app: AsyncApp) -> None:
        app.action(ACTIONS)(self._on_action)

    async def _on_action(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self._background.run(self._press(body))

    async def _press(self, body: dict[str, Any]) -> None:
        press, sink = read_press(body), self._sink()
        if press is None or self._desk is None or sink is None:
            user, channel = body.get("user"), body.get("channel")
            if isinstance(user, dict) and isinstance(channel, dict):
                await self._privately(str(channel.get("id")), str(user.get("id")), APPROVAL_UNKNOWN)
            log.warning("slack_action_unknown")
            return
        try:  # a redelivered press is taken once
            first = await sink.note(source=INBOX_SOURCE, marks=[f"action:{press.trigger}"])
        except IntakeUnavailable:
            first = True  # the decision itself is taken once by the store
        if not first:
            return
        users = self._settings.allowed_user_ids
        if users and press.user not in users:
            log.warning("slack_event_not_allowed", reason="action", user=press.user)
            return
        answer = await self._desk.press(
            press.approval_id, press.approve, f"{PLATFORM}:{press.user}"
        )
        if not answer.changed:
            await self._privately(press.channel, press.user, answer.text)

    async def _privately(self, channel: str, user: str, text: str) -> None:
        try:
            await self._client.chat_postEphemeral(channel=channel, user=user, text=text)
        except CALL_ERRORS as exc:
            log.warning("slack_ephemeral_failed", error=error_code(exc))
