"""Long-running `bot` commands a test starts, signals and kills (`bot run`, as replicas or across
many SIGKILLs): each a fork of the warm server (see server.py), known by the pid of the command
itself, so a signal, SIGKILL included, reaches the real `bot` process and not its launcher.

    async with Bots(bot_command, env, output=log) as bots:
        bot = await bots.start("--config", str(config), "run")
        status = await bot.stop(signal.SIGTERM)  # 0 for a clean exit, -N for death by signal N
    # leaving kills (SIGKILL) and waits for every command still running
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from types import TracebackType
from typing import IO

START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0


class Bot:
    """One running command: `pid` is the `bot` process itself."""

    def __init__(self, launcher: asyncio.subprocess.Process, pid: int) -> None:
        self.launcher = launcher
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        """None while it runs; then its exit status, or minus the signal that ended it."""
        return self.launcher.returncode

    async def stop(self, signum: int = signal.SIGKILL) -> int:
        """Send `signum` to the command and wait until it has ended (and was reaped): its exit
        status, or minus the signal that ended it."""
        if self.launcher.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)
        return await asyncio.wait_for(self.launcher.wait(), STOP_TIMEOUT)


class Bots:
    """Starts `bot` commands with one environment and output; kills what still runs on exit."""

    def __init__(
        self, command: list[str], env: dict[str, str], output: IO[bytes] | int | None = None
    ) -> None:
        self._command = command
        self._env = env
        self._output = asyncio.subprocess.DEVNULL if output is None else output
        self._started: list[Bot] = []

    async def start(self, *args: str) -> Bot:
        """Start `bot ARGS...`; returns once the command's process exists."""
        read, write = os.pipe()
        try:
            launcher = await asyncio.create_subprocess_exec(
                *self._command,
                *args,
                env={**self._env, "WARMBOT_PID_FD": str(write)},
                pass_fds=(write,),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=self._output,
                stderr=self._output,
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        line = await _read_line(read)
        if not line:
            await launcher.wait()
            raise AssertionError(f"`bot {' '.join(args)}` did not start ({launcher.returncode})")
        bot = Bot(launcher, int(line))
        self._started.append(bot)
        return bot

    async def __aenter__(self) -> Bots:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for bot in self._started:
            if bot.returncode is None:
                await bot.stop(signal.SIGKILL)


async def _read_line(fd: int) -> bytes:
    """One line from a pipe, read on the event loop (the pipe is closed after)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0)
    )
    try:
        return (await asyncio.wait_for(reader.readline(), START_TIMEOUT)).strip()
    finally:
        transport.close()
