"""A store writer to be killed: run as `python -m tests.store.sqlite.crash_writer DB_PATH`.

It imports everything once, then reads commands on stdin. `run N` forks a worker that opens the
store, checks what earlier (killed) workers left (`ok MAX` or `bad REASON`), and then runs turns
in a loop the way the host does (inbox mark, history publish, memory capture, turn record), writing
`committed N` after each publish returns. The parent kills the worker with SIGKILL whenever it
likes; this process reaps it and writes `exit STATUS`. `quit` ends it.

Forking from a process that has imported but never started an event loop or a thread is safe,
and far cheaper than starting a new interpreter for each of the fifty kills.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import structlog

from bot.config import MemorySettings, StoreSettings
from bot.ports.memory import MemoryCapture
from bot.ports.records import TurnRecord
from bot.store.sqlite import SqliteStore, open_store
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

KEYS = 5
TURN_LEN = 4


def key_for(n: int) -> str:
    return f"crash:{n % KEYS}"


def turn_entries(n: int) -> list[HistoryEntry]:
    return [
        HistoryEntry("user", (TextBlock(f"question {n}"),), speaker="Crash (@crash)", tokens=3),
        HistoryEntry("assistant", (ToolUseBlock(f"call-{n}", "memory_recall", {"query": f"{n}"}),)),
        HistoryEntry("user", (ToolResultBlock(f"call-{n}", f"result {n}"),)),
        HistoryEntry("assistant", (TextBlock(f"answer {n}"),), tokens=2),
    ]


class Broken(Exception):
    """Committed history is not whole: the message says where."""


async def committed_turns(store: SqliteStore) -> list[int]:
    """Every turn number in history, checking each is whole, in place, ordered and unique."""
    seen: list[int] = []
    for k in range(KEYS):
        key = f"crash:{k}"
        entries = await store.history.load(key)
        if len(entries) % TURN_LEN:
            raise Broken(f"{key}: {len(entries)} entries is not a whole number of turns")
        numbers = []
        for start in range(0, len(entries), TURN_LEN):
            n = int(entries[start].text.removeprefix("question "))
            if entries[start : start + TURN_LEN] != turn_entries(n) or key_for(n) != key:
                raise Broken(f"{key}: turn {n} is not stored whole or is in the wrong place")
            numbers.append(n)
        if numbers != sorted(set(numbers)):
            raise Broken(f"{key}: turns out of order or duplicated: {numbers}")
        seen += numbers
    if len(seen) != len(set(seen)):
        raise Broken("a turn is stored in two conversations")
    return seen


async def worker(path: Path, expect: int) -> None:
    store = await open_store(StoreSettings(path=path), MemorySettings())
    try:
        seen = await committed_turns(store)
        if expect >= 0 and expect not in seen:
            raise Broken(f"turn {expect} was reported committed but is gone")
        integrity = await store.db.integrity_check()
        if integrity != "ok":
            raise Broken(f"integrity_check: {integrity}")
    except Broken as exc:
        say(f"bad {exc}")
        return
    n = max(seen, default=-1)
    say(f"ok {n}")
    while True:
        n += 1
        if not await store.inbox.note(source="crash", marks=[f"event-{n}"]):
            continue  # seen before a kill: the host would not answer it again either
        await store.history.publish(key_for(n), turn_entries(n))
        say(f"committed {n}")
        now = datetime.now(UTC)
        await store.memory.capture(
            MemoryCapture(key_for(n), key_for(n), "crash", "Crash", f"question {n}", "ok", now)
        )
        await store.records.save(TurnRecord(f"turn-{n}", key_for(n), "console", now, now, "ok"))


def say(line: str) -> None:
    # os.write, not print: nothing buffered may be copied into a forked worker.
    os.write(1, (line + "\n").encode())


def serve(path: Path) -> None:
    for command in sys.stdin:
        if command.strip() == "quit":
            return
        expect = int(command.split()[1])
        pid = os.fork()
        if pid == 0:
            try:
                asyncio.run(worker(path, expect))
            finally:
                os._exit(0)
        say(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        say(f"exit {status}")


if __name__ == "__main__":
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    serve(Path(sys.argv[1]))
