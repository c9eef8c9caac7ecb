"""The composition root's shared parts: one TLS client context for every HTTPS client."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from bot.cli.compose import App
from bot.cli.settings import load_config
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram


async def test_the_model_slack_and_telegram_clients_read_the_ca_bundle_once(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a TLS client context reads the whole CA bundle (a noticeable part of start-up);
    the Anthropic, Slack and Telegram clients (PTB has two) share one."""
    loads: list[str] = []

    def counted(name: str) -> Any:
        real = getattr(ssl.SSLContext, name)

        def load(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> Any:
            loads.append(name)
            return real(self, *args, **kwargs)

        return load

    for name in ("load_verify_locations", "set_default_verify_paths"):
        monkeypatch.setattr(ssl.SSLContext, name, counted(name))
    async with FakeAnthropic() as claude, FakeSlack() as slack, FakeTelegram() as tg:
        write_config(
            agent_dir,
            f"""
            [model]
            max_retries = 0

            [slack]
            enabled = true
            api_url = "{slack.api_url}"

            [telegram]
            enabled = true
            api_url = "{tg.base_url}"
            poll_timeout = 1
            """,
        )
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_APP_TOKEN": slack.app_token,
            "TELEGRAM_BOT_TOKEN": tg.token,
        }
        async with App(load_config(agent_dir / "bot.toml", env=env)) as app:
            assert {channel.name for channel in app.channels} == {"slack", "telegram"}
    assert len(loads) == 1, loads
