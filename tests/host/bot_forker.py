"""A `bot run` to be killed: run as `python -m tests.host.bot_forker`.

It imports everything `bot run` needs once, then reads commands on stdin. `run CONFIG` forks a
child that runs the real CLI (`bot --config CONFIG run`) and writes `pid N`; when the child ends
(killed, most often) it writes `exit STATUS`. `spawn CONFIG` forks one the same way but returns at
once (several may run side by side, as replicas); `wait N` waits for child N to end and writes
`exit STATUS`. `quit` ends it. Forking a process that has imported
but never started an event loop or a thread is safe, and far cheaper than starting a new
interpreter for each of many kills (the same trick as tests/store/crash_writer.py).
"""

from __future__ import annotations

import os
import sys

import anthropic  # noqa: F401  (imported here so each child starts warm)
import slack_bolt.async_app  # noqa: F401
import telegram.ext  # noqa: F401

import bot.cli.compose
import bot.cli.run
import bot.model  # noqa: F401
import channels.slack
import channels.telegram  # noqa: F401
from bot.cli import main as bot_main


def serve() -> None:
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "quit":
            return
        if command == "wait":
            _, status = os.waitpid(int(argument), 0)
            print(f"exit {status}", flush=True)
            continue
        if command not in ("run", "spawn"):
            continue
        pid = os.fork()
        if pid == 0:
            os.dup2(2, 1)  # the child's output must not mix with these lines
            code = 1
            try:
                code = bot_main(["--config", argument, "run"])
            finally:
                os._exit(code)
        print(f"pid {pid}", flush=True)
        if command == "run":
            _, status = os.waitpid(pid, 0)
            print(f"exit {status}", flush=True)


if __name__ == "__main__":
    serve()
