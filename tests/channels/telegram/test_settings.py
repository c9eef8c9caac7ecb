"""The [telegram] settings: a wrong Bot API base URL is refused at load time, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_config
from bot.errors import ConfigError
from tests.conftest import write_config


def test_api_url_must_end_in_bot(agent_dir: Path) -> None:
    write_config(agent_dir, '[telegram]\nenabled = true\napi_url = "https://api.telegram.org"\n')
    with pytest.raises(ConfigError, match=r"telegram\.api_url = 'https://api\.telegram\.org'"):
        load_config(agent_dir / "bot.toml", env={})


def test_telegram_defaults(agent_dir: Path) -> None:
    write_config(agent_dir, "[telegram]\nenabled = true\n")
    telegram = load_config(agent_dir / "bot.toml", env={}).settings.telegram
    assert telegram.api_url == "https://api.telegram.org/bot"
    assert (telegram.mode, telegram.webhook_path, telegram.poll_timeout) == (
        "polling",
        "/telegram/webhook",
        30,
    )
