"""Fixtures for the Slack tests: a populated fake Slack and small stand-ins for host ports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.cli.settings import Config, load_config
from tests.conftest import whole_answers, write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.sinks import RecordingSink

MakeConfig = Callable[..., Config]
SIGNING_SECRET = "fake-signing-secret-0123456789abcdef"

ALICE = "U0ALICE01"
BOB = "U0BOB0001"
GENERAL = "C0GENERAL"
DM = "D0ALICE01"
GROUP = "G0GROUP01"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.add_user(ALICE, "alice", real_name="Alice Chen")
        fake.add_user(BOB, "bob", real_name="Bob Stone")
        fake.add_channel(GENERAL, "general")
        fake.add_channel(DM, kind="im")
        fake.add_channel(GROUP, "mpdm-alice--bob--bot-1", kind="mpim")
        yield fake


@pytest.fixture
def make_config(agent_dir: Path, slack: FakeSlack, claude: FakeAnthropic) -> MakeConfig:
    """A config with Slack enabled against the fake; `extra` TOML goes under [slack].
    Answers are posted whole unless `extra` sets streaming (`whole_answers`)."""

    def make(extra: str = "", **env: str) -> Config:
        write_config(
            agent_dir,
            f'[model]\nmax_retries = 0\n\n[slack]\nenabled = true\napi_url = "{slack.api_url}"\n'
            + whole_answers(extra)
            + extra,
        )
        environment = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": claude.base_url,
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_APP_TOKEN": slack.app_token,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            **env,
        }
        return load_config(agent_dir / "bot.toml", env=environment)

    return make


__all__ = ["RecordingSink"]
