"""The whole configuration: the core's sections composed with each part's own, and its loader."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from bot import config
from bot.config import CoreSettings
from bot.console.settings import ConsoleSettings
from bot.mcp.settings import McpSettings
from bot.policy.access import AccessSettings
from bot.tools.approvals import ApprovalSettings
from bot.voice.settings import VoiceSettings
from channels.cron.settings import CronSettings, SchedulesSettings, WebhookSettings
from channels.slack import settings as slack
from channels.slack.settings import SlackSettings
from channels.telegram import settings as telegram
from channels.telegram.settings import TelegramSettings


class Settings(CoreSettings):
    """Every section of the file (the core's, then each channel's)."""

    SECRETS: ClassVar[tuple[str, ...]] = (*CoreSettings.SECRETS, *slack.SECRETS, *telegram.SECRETS)
    ORDER: ClassVar[tuple[str, ...]] = (
        *("agent", "model", "store", "memory", "slack", "telegram", "http", "attachments"),
        *("voice", "cron", "schedules", "host", "logging", "prompt", "budget", "mcp"),
        *("approvals", "otel", "console", "access"),
    )

    slack: SlackSettings = SlackSettings()
    telegram: TelegramSettings = TelegramSettings()
    voice: VoiceSettings = VoiceSettings()
    cron: CronSettings = CronSettings()
    schedules: SchedulesSettings = SchedulesSettings()
    webhooks: list[WebhookSettings] = Field(default_factory=list)
    mcp: McpSettings = McpSettings()
    approvals: ApprovalSettings = ApprovalSettings()
    console: ConsoleSettings = ConsoleSettings()
    access: AccessSettings = AccessSettings()

    def platforms(self) -> frozenset[str]:
        """The chat platforms this host runs (where cron and webhooks may post)."""
        return frozenset(name for name in ("slack", "telegram") if getattr(self, name).enabled)

    def secret_names(self) -> tuple[str, ...]:
        # Each webhook names the variable holding its bearer token; each MCP server those of its
        # env and headers_env (their values are redacted everywhere, like every secret).
        hooks = (hook.token_env for hook in self.webhooks)
        return (
            *super().secret_names(),
            *hooks,
            *self.mcp.secret_names(),
            *self.console.secret_names(),
        )


Config = config.Config[Settings]


def load_config(
    path: Path | None = None, env: Mapping[str, str] | None = None, *, verify_files: bool = True
) -> Config:
    """Read and validate the whole configuration (see `bot.config.load_config`)."""
    return config.load_config(Settings, path, env, verify_files=verify_files)
