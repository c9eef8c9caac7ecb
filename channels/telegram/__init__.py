"""Telegram: the channel adapter (python-telegram-bot) and its deliverer."""

from channels.telegram.channel import TelegramChannel, TelegramConfigError, check_token
from channels.telegram.deliver import TelegramDeliverer, TelegramRouteError

__all__ = [
    "TelegramChannel",
    "TelegramConfigError",
    "TelegramDeliverer",
    "TelegramRouteError",
    "check_token",
]
