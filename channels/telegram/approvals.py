"""Approval cards on Telegram: the message with its inline keyboard, its update once decided, and
the presses (`callback_query`), each answered with `answerCallbackQuery`.

A button's callback data is `ap:a:<id>` (approve) or `ap:d:<id>` (deny): the opaque approval id
and nothing else the host would trust. Anything else is not ours and is answered as unknown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
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


def _keyboard(card: Card) -> InlineKeyboardMarkup:
    approve = callback_data(card.approval_id, True)
    deny = callback_data(card.approval_id, False)
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(card.approve_label, callback_data=approve),
                InlineKeyboardButton(card.deny_label, callback_data=deny),
            ]
        ]
    )


async def post_card(bot: Bot, route: ReplyRoute, card: Card) -> dict[str, Any]:
    """The card as plain text (no parse mode: nothing in it is markup) with its two buttons."""
    target = Target.of(route)
    sent = await bot.send_message(
        chat_id=target.chat_id,
        text=card.text[:MAX_CARD],
        message_thread_id=target.thread_id,
        reply_markup=_keyboard(card),
    )
    return {"chat_id": sent.chat_id, "message_id": sent.message_id}


async def post_private(
    bot: Bot, route: ReplyRoute, card: Card, approvers: Sequence[str]
) -> dict[str, Any]:
    """The card in the private chat of each approver who has started the bot (a person's
    private chat id is their user id), and one line in the conversation; with none reachable,
    the card without its arguments in the conversation."""
    private = []
    for approver in approvers:
        platform, _, user = approver.partition(":")
        if platform != PLATFORM or not user.lstrip("-").isdigit():
            continue
        try:
            sent = await bot.send_message(
                chat_id=int(user), text=card.text[:MAX_CARD], reply_markup=_keyboard(card)
            )
        except TelegramError as exc:  # never started the bot, or blocked it
            log.info("telegram_private_card_failed", error=type(exc).__name__)
            continue
        private.append({"chat_id": sent.chat_id, "message_id": sent.message_id})
    target = Target.of(route)
    if not private:
        return await post_card(bot, route, replace(card, text=card.hidden_text))
    line = await bot.send_message(
        chat_id=target.chat_id, text=card.notice[:MAX_CARD], message_thread_id=target.thread_id
    )
    return {"chat_id": line.chat_id, "message_id": line.message_id, "private": private}


async def close_card(bot: Bot, where: dict[str, Any], text: str) -> None:
    for card in [where, *where.get("private", ())]:
        try:
            await bot.edit_message_text(
                text[:MAX_CARD], chat_id=card["chat_id"], message_id=card["message_id"]
            )
        except TelegramError as exc:  # the others are closed all the same
            log.warning("telegram_card_update_failed", error=type(exc).__name__)


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
