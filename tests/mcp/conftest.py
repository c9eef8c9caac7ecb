"""Fixtures for the MCP tests: the notes server's command, its call log, and a config helper that
adds `[[mcp.servers]]` and `[[surfaces]]` entries to the Slack test config."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.cli.settings import Config
from tests.channels.slack.conftest import MakeConfig, make_config, slack  # noqa: F401
from tests.cli.conftest import bot  # noqa: F401
from tests.waiting import GUARD
from tests.warmbot import HOSTILE_COMMAND, NOTES_COMMAND

# The notes server as its own process, a fork of the warm server (tests/warmbot), from any working
# folder: the same server module as `python tests/mcp_servers/notes.py` (which the mcp_tools
# benchmark's smoke run starts as a script), without its half second of importing the SDK.
NOTES = NOTES_COMMAND


@pytest.fixture(autouse=True)
def _warm_server(bot_command: list[str]) -> None:
    """NOTES needs this session's warm server running."""


SECRET = "notes-token-SECRET-0042-abcdef"


class CallLog:
    """What reached the notes server: one line per call it ran (its tool, arguments, pid)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def tools(self) -> list[str]:
        return [call["tool"] for call in self.calls()]


@pytest.fixture
def call_log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.jsonl")


def server_toml(
    name: str = "notes",
    *,
    timeout: float = 10,
    max_output_bytes: int = 4096,
    url: str | None = None,
) -> str:
    where = f'url = "{url}"' if url else f"command = {json.dumps(NOTES)}"
    env = (
        'headers_env = { Authorization = "NOTES_AUTH" }\n'
        if url
        else 'env = ["NOTES_CALLS", "NOTES_TOKEN"]\n'
    )
    return (
        f'\n[[mcp.servers]]\nname = "{name}"\n{where}\n{env}'
        f"timeout_seconds = {timeout}\nmax_output_bytes = {max_output_bytes}\n"
    )


def hostile_toml(
    name: str,
    *mode: str,
    env: tuple[str, ...] = ("HOSTILE_LOG",),
    timeout: float = 10,
    extra: str = "",
) -> str:
    """A `[[mcp.servers]]` entry running a hostile server (tests/mcp_servers/hostile.py) in
    `mode` (its mode and arguments); `extra` is more TOML for the entry."""
    command = json.dumps([*HOSTILE_COMMAND, *mode])
    return (
        f'\n[[mcp.servers]]\nname = "{name}"\ncommand = {command}\nenv = {json.dumps(list(env))}\n'
        f"timeout_seconds = {timeout}\n{extra}"
    )


def rule_toml(surface_id: str, tools: list[str]) -> str:
    return f'\n[[surfaces]]\nplatform = "slack"\nid = "{surface_id}"\ntools = {json.dumps(tools)}\n'


MakeMcpConfig = Callable[..., Config]


@pytest.fixture
def make_mcp_config(make_config: MakeConfig, call_log: CallLog) -> MakeMcpConfig:  # noqa: F811
    """The Slack config plus `toml` (servers and rules), with the notes server's variables."""

    def make(toml: str, **env: str) -> Config:
        return make_config(
            toml,
            NOTES_CALLS=str(call_log.path),
            NOTES_TOKEN=SECRET,
            NOTES_AUTH=f"Bearer {SECRET}",
            **env,
        )

    return make


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def http_notes(call_log: CallLog) -> AsyncIterator[str]:
    """The notes server over streamable HTTP on loopback (its own process); yields its URL. It
    expects `Authorization: Bearer <SECRET>`."""
    port = free_port()
    env = {**os.environ, "NOTES_CALLS": str(call_log.path), "NOTES_EXPECT": f"Bearer {SECRET}"}
    process = await asyncio.create_subprocess_exec(
        *NOTES,
        "--http",
        str(port),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(GUARD):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await process.wait()


@pytest.fixture
def hold(tmp_path: Path) -> Path:
    """A named pipe for the notes server's `wait` tool: the call stays open until a line is
    written to it (`tests.mcp.test_busy_slack.release`)."""
    pipe = tmp_path / "hold"
    os.mkfifo(pipe)
    return pipe
