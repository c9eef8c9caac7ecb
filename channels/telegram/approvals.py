"""Approval cards on Telegram: the message with its inline keyboard, its update once decided, and
the presses (`callback_query`), each answered with `answerCallbackQuery`.

A button's callback data is `ap:a:<id>` (approve) or `ap:d:<id>` (deny): the opaque approval id
and nothing else the host would trust. Anything else is not ours and is answered as unknown.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from bot.ports.approvals import Card, PressDesk
from bot.replies import APPROVAL_UNKNOWN
from bot.turns import ReplyRoute
from channels.telegram.deliver import Target
from channels.telegram.mapping import PLATFORM

log = structlog.get_logger(__name__)

_DATA = re.compile(r"ap:([ad]):([A-Za-z0-9_-]{16,32})")
MAX_CARD = 3500  # characters of card text; Telegram's limit is 4,096


def callback_data(approval_id: str, approve: bool) -> str:
    return f"ap:{'a' if approve else 'd'}:{approval_id}"


def parse_callback(data: object) -> tuple[str, bool] | None:
    """(approval id, approve) from a button's callback data; None for anything else."""
    if not isinstance(data, str):
        return None
    match = _DATA.fullmatch(data)
    if match is None:
        return None
    return match.group(2), match.group(1) == "a"


async def post_card(bot: Bot, route: ReplyRoute, card: Card) -> dict[str, Any]:
    """The card as plain text (no parse mode: nothing in it is markup) with its two buttons."""
    target = Target.of(route)
    keyboard = InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(
                    card.approve_label, callback_data=callback_data(card.approval_id, True)
                ),
                InlineKeyboardButton(
                    card.deny_label, callback_data=callback_data(card.approval_id, False)
                ),
            ]
        ]
    )
    sent = await bot.send_message(
        chat_id=target.chat_id,
        text=card.text[:MAX_CARD],
        message_thread_id=target.thread_id,
        reply_markup=keyboard,
    )
    return {"chat_id": sent.chat_id, "message_id": sent.message_id}


async def close_card(bot: Bot, where: dict[str, Any], text: str) -> None:
    await bot.edit_message_text(
        text[:MAX_CARD], chat_id=where["chat_id"], message_id=where["message_id"]
    )


async def press(bot: Bot, desk: PressDesk | None, query: dict[str, Any]) -> None:
    """Decide (or refuse) one press and answer it privately; the answer always goes out."""
    parsed = parse_callback(query.get("data"))
    sender = query.get("from")
    presser = f"{PLATFORM}:{sender.get('id')}" if isinstance(sender, dict) else ""
    if parsed is None or desk is None or not presser:
        text = APPROVAL_UNKNOWN
    else:
        approval_id, approve = parsed
        text = (await desk.press(approval_id, approve, presser)).text
    try:
        await bot.answer_callback_query(str(query.get("id")), text=text[:200], show_alert=False)
    except TelegramError as exc:
        log.warning("telegram_callback_answer_failed", error=type(exc).__name__)
