"""The `bot` command for the CLI tests: `bot(*args, env=, cwd=, stdin=)` runs it in a process
of its own and returns the completed process (text output)."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

REPO = Path(__file__).parents[2]

RunBot = Callable[..., "subprocess.CompletedProcess[str]"]


def run_command(
    command: list[str],
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stdin: str = "",
) -> subprocess.CompletedProcess[str]:
    environment = subprocess_env()
    environment.update(env or {})
    return subprocess.run(
        [*command, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd or REPO,
        timeout=60,
    )


@pytest.fixture
def bot(bot_command: list[str]) -> RunBot:
    """Run `bot ARGS` in a process of its own (a fork of the session's warm server)."""
    return functools.partial(run_command, bot_command)
