"""Crash safety: fifty SIGKILLs at random points of real turn writes lose nothing committed.

A writer process (tests/store/crash_writer.py) runs turns the way the host does; each one is
killed with SIGKILL at a random moment (while opening the store, mid-publish, mid-capture...),
and the next one must find every turn it reported committed, whole and not duplicated, and
`PRAGMA integrity_check` clean. A last check runs here, in a fresh store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import MemorySettings, StoreSettings
from bot.store.sqlite import open_store
from tests.store.sqlite.crash_writer import committed_turns

ROOT = Path(__file__).resolve().parents[3]
KILLS = 50
LINE_TIMEOUT = 20.0


class Writer:
    """The crash_writer process and a thread reading its lines (so reads can time out)."""

    def __init__(self, db: Path, stderr: Path) -> None:
        self._stderr = stderr.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.store.sqlite.crash_writer", str(db)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.worker: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def line(self) -> str:
        try:
            return self.lines.get(timeout=LINE_TIMEOUT)
        except queue.Empty:
            raise AssertionError("the crash writer stopped answering") from None

    def close(self) -> None:
        if self.worker is not None:  # a test that failed mid-run leaves its worker writing
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.worker, signal.SIGKILL)
        if self.process.poll() is None:
            self.send("quit")
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=LINE_TIMEOUT)  # it ends at the pipe's end of file
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._stderr.close()


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    started = Writer(tmp_path / "data" / "crash.sqlite3", tmp_path / "writer.stderr")
    yield started
    started.close()


def run_and_kill(writer: Writer, expect: int, rng: random.Random) -> tuple[str, int]:
    """One worker life: start it, kill it at a random point; its check and last committed turn."""
    writer.send(f"run {expect}")
    pid = writer.worker = int(writer.line().removeprefix("pid "))
    check = ""
    last = expect
    line = ""
    if rng.random() < 0.25:
        # Kill while it is still opening the store or checking it.
        threading.Event().wait(rng.uniform(0, 0.02))
    else:
        check = writer.line()
        # Let it commit a few turns first, counted rather than timed, so a loaded machine still
        # kills every worker with committed work behind it; then kill at a random moment.
        for _ in range(rng.randint(1, 3) if check.startswith("ok") else 0):
            line = writer.line()
            if not line.startswith("committed "):
                break
            last = int(line.removeprefix("committed "))
        threading.Event().wait(rng.uniform(0, 0.02))
    with contextlib.suppress(ProcessLookupError):  # a worker that found damage has returned
        os.kill(pid, signal.SIGKILL)
    while not line.startswith("exit "):
        line = writer.line()
        if line.startswith("committed "):
            last = int(line.removeprefix("committed "))
        elif line.startswith(("ok ", "bad ")):
            check = line
    assert not check.startswith("bad"), check
    return check, last


@pytest.mark.slow
def test_fifty_kills_lose_no_committed_turn(writer: Writer, tmp_path: Path) -> None:
    rng = random.Random(os.environ.get("CRASH_SEED", "20250301"))
    last = -1
    checks = 0
    for _ in range(KILLS):
        check, last = run_and_kill(writer, last, rng)
        checks += check.startswith("ok")
    assert last >= KILLS // 2, "the writers should have committed turns between kills"
    assert checks > KILLS // 2

    turns, integrity = asyncio.run(final_state(tmp_path / "data" / "crash.sqlite3"))

    assert last in turns
    assert integrity == "ok"


async def final_state(path: Path) -> tuple[list[int], str]:
    store = await open_store(StoreSettings(path=path), MemorySettings())
    try:
        return await committed_turns(store), await store.db.integrity_check()
    finally:
        await store.aclose()
