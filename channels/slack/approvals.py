"""Approval cards on Slack: a Block Kit message with Approve and Deny buttons, its update once
decided, and the presses (`block_actions`, over Socket Mode or signed HTTP like events).

A button's `action_id` says approve or deny and its `value` is the opaque approval id, nothing
more. Every text is escaped for mrkdwn (`&`, `<`, `>`), so an argument cannot mention anyone,
open a link or post a channel-wide ping. While the card waits, the message that asked carries a
reaction (the conversation's sign that it waits), taken down when the card is closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.ports.approvals import Card
from bot.turns import ReplyRoute
from channels.slack.api import CALL_ERRORS, error_code

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


async def close_card(client: AsyncWebClient, where: dict[str, Any], text: str) -> None:
    shown = escaped(text)[:MAX_SECTION]
    await client.chat_update(
        channel=where["channel"],
        ts=where["ts"],
        text=shown,
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": shown}}],
    )
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
