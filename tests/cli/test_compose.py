"""The composition root's shared parts: one TLS client context for every HTTPS client, built once
per process."""

from __future__ import annotations

import gc
import ssl
from pathlib import Path
from typing import Any

import pytest

from bot.cli.compose import App, _client_tls, client_tls
from bot.cli.settings import load_config
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram


async def test_the_model_slack_and_telegram_clients_read_the_ca_bundle_once(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a TLS client context reads the whole CA bundle (a noticeable part of start-up);
    the Anthropic, Slack and Telegram clients (PTB has two) share one, and so does the next App
    of the same process."""
    _client_tls.cache_clear()  # as in a fresh process
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
        async with App(load_config(agent_dir / "bot.toml", env=env)):
            pass
    assert len(loads) == 1, loads


def test_another_ca_setting_gets_a_context_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The context is built with the CAs that SSL_CERT_FILE / SSL_CERT_DIR name at the time: a
    process that changes them gets a new one."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    default = client_tls()
    assert client_tls() is default
    monkeypatch.setenv("SSL_CERT_FILE", ssl.get_default_verify_paths().openssl_cafile)
    assert client_tls() is not default


async def test_a_started_app_keeps_its_start_up_heap_out_of_full_collections(
    agent_dir: Path,
) -> None:
    """What start-up built lives as long as the process: frozen, a full collection does not walk
    it again on some turn (a pause of the whole loop); closing gives it back to the collector."""
    gc.unfreeze()
    async with FakeAnthropic() as claude:
        write_config(agent_dir, "[model]\nmax_retries = 0\n")
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
        }
        async with App(load_config(agent_dir / "bot.toml", env=env), channels=[]):
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() == 0
