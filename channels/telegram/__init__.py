"""Telegram: the channel adapter (python-telegram-bot) and its deliverer."""

from channels.telegram.channel import TelegramChannel, check_token
from channels.telegram.deliver import TelegramDeliverer

__all__ = [
    "TelegramChannel",
    "TelegramDeliverer",
    "check_token",
]
