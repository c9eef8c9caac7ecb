"""Telegram's settings: the `[telegram]` section and the secrets the Telegram channel reads."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from bot.config import Section

# Environment variables the Telegram channel reads credentials from (never the file).
SECRETS = ("TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET")


class TelegramSettings(Section):
    enabled: bool = False
    mode: Literal["polling", "webhook"] = "polling"
    api_url: str = "https://api.telegram.org/bot"
    webhook_url: str | None = None
    allowed_chat_ids: list[int] = Field(default_factory=list)
    allowed_user_ids: list[int] = Field(default_factory=list)
    group_buffer: Annotated[int, Field(ge=1, le=1000)] = 50
    # How answers show while they are written: drafts in private chats and an edited message in
    # groups ("native"), an edited message everywhere ("edits"), or only whole ("off").
    stream: Literal["native", "edits", "off"] = "native"
    # Seconds between two updates of one streamed message: in private chats, and in groups
    # (Telegram allows a bot about 20 messages a minute in a group).
    stream_interval: Annotated[float, Field(ge=0.0, le=60.0)] = 1.0
    group_stream_interval: Annotated[float, Field(ge=0.0, le=60.0)] = 3.0
    # Webhook mode: the route on the [http] port that Telegram posts updates to.
    webhook_path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9/_.-]*$")] = "/telegram/webhook"
    # Polling mode: how long one getUpdates long poll may wait for news (Telegram allows 0-50 s).
    poll_timeout: Annotated[int, Field(ge=0, le=50)] = 30
    # Where files are downloaded from (`<file_url><token>/<file_path>`); by default the Bot API
    # server's own `/file/bot` next to api_url.
    file_url: Annotated[str, Field(pattern=r"^https?://[^\s/]+(/\S*)?/file/bot$")] | None = None

    @property
    def files_base(self) -> str:
        return self.file_url or self.api_url.removesuffix("/bot") + "/file/bot"

    @field_validator("api_url")
    @classmethod
    def _bot_api_base(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+(/\S*)?/bot$", value):
            raise ValueError(
                "must be an http(s) URL ending in /bot (python-telegram-bot appends "
                "<token>/<method>), e.g. 'https://api.telegram.org/bot'"
            )
        return value
