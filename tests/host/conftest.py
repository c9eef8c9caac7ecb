"""Fixtures for host tests: the real composition (store, assembler, Anthropic runtime) against the
fake Anthropic server, with the console channel as the way in and out."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli.compose import App, Runs
from bot.cli.settings import Config, load_config
from bot.prompt import TokenCounter
from channels.console import ConsoleChannel
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic

AppFactory = Callable[..., App]


@pytest.fixture
def fake(claude: FakeAnthropic) -> FakeAnthropic:
    """This package's name for the shared fake Messages API (tests/conftest.py)."""
    return claude


@pytest.fixture
def make_config(agent_dir: Path, fake: FakeAnthropic) -> Callable[..., Config]:
    def make(extra: str = "", **env: str) -> Config:
        write_config(agent_dir, "[model]\nmax_retries = 0\n" + extra)
        environment = {
            "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
            "ANTHROPIC_BASE_URL": fake.base_url,
            **env,
        }
        return load_config(agent_dir / "bot.toml", env=environment)

    return make


# The host and the store, no HTTP port, no scheduler, nothing resumed: the tests drive the turns.
HOST_ONLY = Runs(http=False, scheduler=False, resume=False)


def console(name: str = "test", text: str = "") -> tuple[ConsoleChannel, io.StringIO]:
    """A console channel for an App's channel list (`ready(channel)`), reading `text` (its
    conversation starts with the App) and writing to the returned buffer."""
    out = io.StringIO()
    channel = ConsoleChannel(f"console:{name}", stdin=io.StringIO(text), stdout=out)
    return channel, out


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    """The token counter the in-memory host rigs' assemblers count with (`tests/host/rig.py`)."""
    return TokenCounter()
