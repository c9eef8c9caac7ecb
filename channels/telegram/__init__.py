"""Telegram: the channel adapter (python-telegram-bot) and its deliverer."""
