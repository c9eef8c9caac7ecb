"""Fixtures for the Telegram tests: the fake Bot API, a real PTB Bot on it, the whole App."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from telegram import Bot

from bot.cli.settings import Config, load_config
from channels.telegram import polling
from tests.conftest import whole_answers, write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

MakeConfig = Callable[..., Config]


@pytest.fixture(autouse=True)
def quick_poll_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Polling asks again after a failure or a refused update 0.05 s later, not 0.5 s (it still
    doubles): the tests wait on what happens, and a tenth of the wait is a tenth of their time."""
    monkeypatch.setattr(polling, "POLL_BACKOFF", 0.05)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    bot = Bot(tg.token, base_url=tg.base_url)
    await bot.initialize()
    yield bot
    await bot.shutdown()


@pytest.fixture
def make_config(agent_dir: Path, tg: FakeTelegram, claude: FakeAnthropic) -> MakeConfig:
    """A config with Telegram enabled against the fake; `extra` TOML goes under [telegram].
    Answers are sent whole unless `extra` sets streaming (`whole_answers`)."""

    def make(extra: str = "", **env: str) -> Config:
        write_config(
            agent_dir,
            f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
            + whole_answers(extra)
            + extra,
        )
        environment = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "TELEGRAM_BOT_TOKEN": tg.token,
            **env,
        }
        return load_config(agent_dir / "bot.toml", env=environment)

    return make
