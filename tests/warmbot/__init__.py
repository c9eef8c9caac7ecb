"""`bot` commands for subprocess tests, started as forks of a warm server (see server.py): the
`bot_command` fixture is the argument list that runs `bot` (use it where `[sys.executable, "-m",
"bot.cli"]` would go)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = Path(__file__).with_name("launch.py")


@pytest.fixture(scope="session")
def bot_command(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The command that runs `bot` (arguments follow), served by this session's warm server."""
    path = tmp_path_factory.mktemp("warmbot") / "socket"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.warmbot.server", str(path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdin is not None
    try:
        assert server.stdout.readline().strip() == "ready", "the warm bot server did not start"
        yield [sys.executable, "-I", "-S", str(LAUNCH), str(path)]
    finally:
        server.stdin.close()  # the server ends when its stdin does
        server.wait(30)
        server.stdout.close()
