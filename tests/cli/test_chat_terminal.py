"""`bot chat` on a real terminal: a pseudo-terminal drives a real `bot chat` subprocess.

Ctrl-C is the SIGINT the terminal would send. The model is the fake Anthropic server in this
test process.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.cli.settings import load_config
from bot.store.sqlite import open_store
from tests.conftest import subprocess_env
from tests.fakes.anthropic import FakeAnthropic

KEY = "sk-ant-chat-0123456789"


class Terminal:
    """A `bot chat` process on a pseudo-terminal, with everything it printed so far."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process = process
        self.master = master
        self.output = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk.decode("utf-8", "replace")

    def type(self, text: str) -> None:
        data = text.encode()
        for start in range(0, len(data), 512):  # as a paste arrives: in pieces
            os.write(self.master, data[start : start + 512])

    def ctrl_c(self) -> None:
        self.process.send_signal(signal.SIGINT)

    async def wait_for(self, condition: Callable[[], object], within: float = 20.0) -> None:
        async with asyncio.timeout(within):
            while not condition():
                await asyncio.sleep(0.02)

    async def exit_code(self, within: float = 10.0) -> int:
        async with asyncio.timeout(within):
            return await self.process.wait()


@pytest.fixture
async def chat(
    bot_command: list[str], agent_dir: Path
) -> AsyncIterator[tuple[Terminal, FakeAnthropic]]:
    async with FakeAnthropic() as fake:
        master, slave = pty.openpty()
        env = subprocess_env(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake.base_url)
        env["TERM"] = "dumb"
        process = await asyncio.create_subprocess_exec(
            *bot_command, "chat", "--conversation", "tty",
            "--config", str(agent_dir / "bot.toml"),
            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        terminal = Terminal(process, master)
        try:
            await terminal.wait_for(lambda: "you> " in terminal.output)
            yield terminal, fake
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            os.close(master)


async def test_ctrl_c_at_the_prompt_leaves_at_once(chat: tuple[Terminal, FakeAnthropic]) -> None:
    terminal, fake = chat
    terminal.ctrl_c()
    assert await terminal.exit_code(within=5) == 130
    assert "Traceback" not in terminal.output
    assert fake.requests == []


async def test_a_terminal_session_paste_progress_warnings_then_ctrl_c_twice(
    chat: tuple[Terminal, FakeAnthropic], agent_dir: Path
) -> None:
    """One session (a `bot chat` start-up costs seconds): a long paste, a retried answer behind a
    progress sign, then a stalled turn interrupted twice."""
    terminal, fake = chat

    # A paste longer than the terminal's own 4,096-byte line reaches the model whole.
    fake.fail(529)  # overloaded once: the runtime retries and logs a warning
    fake.script("the answer")
    pasted = "".join(f"word{n} " for n in range(1500)).strip()  # about 12,000 characters
    terminal.type(pasted + "\r")
    await terminal.wait_for(lambda: "the answer" in terminal.output)
    # The prompt comes back after the answer (not before it, where the sign would erase it).
    await terminal.wait_for(lambda: "you> " in terminal.output.rsplit("the answer", 1)[1])
    sent = " ".join(block.get("text", "") for block in fake.requests[-1]["messages"][-1]["content"])
    assert pasted in sent

    # A progress sign while waiting; the retry warning went to the log file, not the terminal.
    assert "(thinking…)" in terminal.output
    assert '"level"' not in terminal.output
    log = (agent_dir / "data" / "chat.log").read_text().splitlines()
    assert log
    assert all(json.loads(line)["level"] in {"warning", "error"} for line in log)

    # Ctrl-C during a turn: the first says it is finishing, the second cancels it cleanly.
    fake.stall(30.0)
    asked = len(fake.requests)
    terminal.type("a long job\r")
    await terminal.wait_for(lambda: len(fake.requests) > asked)
    terminal.ctrl_c()
    await terminal.wait_for(lambda: "finishing this answer" in terminal.output)
    terminal.ctrl_c()
    assert await terminal.exit_code() == 130
    assert "cancelling this answer" in terminal.output
    assert "Traceback" not in terminal.output

    config = load_config(agent_dir / "bot.toml", env={})
    store = await open_store(config.settings.store, config.settings.memory)
    try:
        history = await store.history.load("console:tty")
        latest = await store.records.recent("console:tty", limit=1)
    finally:
        await store.aclose()
    assert [entry.role for entry in history] == ["user", "assistant"] * 2
    assert "did not complete" in history[-1].text
    assert latest[0].outcome == "cancelled"
