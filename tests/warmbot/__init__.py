"""Commands for subprocess tests, started as forks of a warm server (see server.py): the
`bot_command` fixture is the argument list that runs `bot` (use it where `[sys.executable, "-m",
"bot.cli"]` would go), and `NOTES_COMMAND` runs the MCP notes server of the tests
(tests/mcp_servers/notes.py) once `bot_command` has started this process's server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = Path(__file__).with_name("launch.py")
# This process's warm server listens on an abstract Unix socket named after the process ("@" is
# the leading NUL byte): a command line that names it can be written before the server starts,
# into a config file, and nothing is left on disk.
SOCKET = f"@warmbot-{os.getpid()}"


def command(program: str) -> list[str]:
    """The argument list that runs `program` ("bot", "notes" or "hostile") as a fork of the warm
    server."""
    return [sys.executable, "-I", "-S", str(LAUNCH), program, SOCKET]


# The notes server over stdio, as an MCP client starts it (the `bot_command` fixture must be up).
NOTES_COMMAND = command("notes")
# A hostile MCP server (tests/mcp_servers/hostile.py): its mode and arguments follow.
HOSTILE_COMMAND = command("hostile")


@pytest.fixture(scope="session")
def bot_command() -> Iterator[list[str]]:
    """The command that runs `bot` (arguments follow), served by this session's warm server."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.warmbot.server", SOCKET],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdin is not None
    try:
        assert server.stdout.readline().strip() == "ready", "the warm bot server did not start"
        yield command("bot")
    finally:
        server.stdin.close()  # the server ends when its stdin does
        server.wait(30)
        server.stdout.close()
