"""Shared fixtures: a starter agent folder on disk and a config that points at it."""

from __future__ import annotations

import gc
import ipaddress
import logging
import os
import re
import socket
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import settings

from tests.engines import (
    clock,
    db_path,
    engine,
    parametrize_engines,
    pg_server,
    skipped_reason,
    store,
)
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI
from tests.warmbot import bot_command

# No property test has a deadline: how long an example takes on a loaded machine is not what any
# of them proves (hypothesis's default, 200 ms an example, failed tests under load).
settings.register_profile("local", deadline=None)
# In CI (CI=true), property tests draw the same examples every run: a submission passes or fails
# on its code, not on which inputs a fresh random seed happened to try, and nothing is read from
# or written to an example database. Local runs keep exploring (and keep what they find in
# .hypothesis/), which is where new failures are found; a failure found that way is fixed and
# kept as an explicit regression test.
settings.register_profile("ci", deadline=None, derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

# Fixtures shared by the whole suite.
__all__ = ["bot_command", "clock", "db_path", "engine", "pg_server", "store"]

IDENTITY = "# Identity\n\nYou are Testbot, a careful assistant for the test team.\n"
SKILL = textwrap.dedent(
    """\
    ---
    name: summarize
    description: Summarize a discussion into decisions and next steps.
    ---
    # Summarize

    List decisions, then open questions, then next steps.
    """
)


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    """The fake Anthropic Messages API, on loopback, for one test."""
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def gpt() -> AsyncIterator[FakeOpenAI]:
    """The fake OpenAI-compatible Chat Completions server, on loopback, for one test."""
    async with FakeOpenAI(api_key="sk-openai-test") as server:
        yield server


def openai_env(gpt: FakeOpenAI, name: str = "qwen3-32b") -> dict[str, str]:
    """The environment that puts `[model]` on the fake OpenAI-compatible server."""
    return {
        "BOT_MODEL__PROVIDER": "openai",
        "BOT_MODEL__NAME": name,
        "BOT_MODEL__BASE_URL": gpt.base_url,
        "OPENAI_API_KEY": "sk-openai-test",
    }


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    """A config folder with IDENTITY.md, one skill and a minimal bot.toml."""
    folder = tmp_path / "agent"
    (folder / "skills" / "summarize").mkdir(parents=True)
    (folder / "IDENTITY.md").write_text(IDENTITY, encoding="utf-8")
    (folder / "skills" / "summarize" / "SKILL.md").write_text(SKILL, encoding="utf-8")
    write_config(folder, "")
    return folder


def whole_answers(extra: str) -> str:
    """`stream = "off"` for a channel's table, unless `extra` sets `stream` or `stream_interval`.

    Whether a live stream opens before a fast fake model has finished depends on timing (a
    loaded machine streams where an idle one did not), so a test about anything but streaming
    must not depend on it: its answers are posted whole. Streaming tests opt in by naming a
    streaming setting (and make the stream open for sure with `FakeAnthropic.hold_midway`)."""
    return "" if re.search(r"(?m)^\s*stream(_interval)?\s*=", extra) else 'stream = "off"\n'


def write_config(folder: Path, extra: str) -> Path:
    """Write bot.toml: the agent section plus `extra` TOML (other sections)."""
    text = textwrap.dedent(
        """\
        [agent]
        identity_path = "IDENTITY.md"
        skills_root = "skills"
        timezone = "Europe/Berlin"

        [store]
        path = "data/bot.sqlite3"

        [http]
        enabled = false
        """
    )
    path = folder / "bot.toml"
    path.write_text(text + textwrap.dedent(extra), encoding="utf-8")
    return path


def _loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # a Unix socket path
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test talks to fakes on this machine: a connection anywhere else fails the test."""
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded(real: Any) -> Any:
        def attempt(self: socket.socket, address: Any) -> Any:
            if not _loopback(address):
                raise AssertionError(f"a test tried to reach {address!r}; use a local fake")
            return real(self, address)

        return attempt

    monkeypatch.setattr(socket.socket, "connect", guarded(connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(connect_ex))


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    """`bot.cli.main` and `configure_logging` set up logging for the whole process (structlog,
    the root handler, the exception hooks) onto a stream pytest closes after the test: leave
    every test as the next one expects."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    hooks = sys.excepthook, threading.excepthook
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
    sys.excepthook, threading.excepthook = hooks
    logging.captureWarnings(False)


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a `bot` subprocess: this one without any bot, model or platform
    setting of the developer's own, plus `extra`."""
    own = ("ANTHROPIC_", "BOT_", "SLACK_", "TELEGRAM_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(own)}
    return {**env, **extra}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_engines(metafunc)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    why = skipped_reason()
    if why:
        terminalreporter.write_line(f"PostgreSQL tests skipped: {why}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first: one started last would leave the other workers idle while it runs
    (work stealing evens out the rest)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """What collecting imported (the SDKs, the package, the test modules: a heap of some 400,000
    objects that live as long as the process) is frozen out of the garbage collector's view, as
    it is imported: each full collection would scan all of it again, 100-300 ms apiece, twenty
    times per worker (about 5 s of CPU each). What the tests create is collected as usual."""
    gc.freeze()
