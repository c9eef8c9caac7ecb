"""The duplicate window (SPEC §11): from Telegram accepting a part to its "delivered" mark being
durable, quiet and under CPU load.

    python -m benchmarks.mark_window [--chats N] [--rounds N] [--load N] [--model instant|server]

Telegram has no idempotency key: a bot killed after Telegram took a message but before the outbox
marked it delivered posts it again at its next start. How long that window stays open is what
this measures. The whole App runs in a process of its own (`benchmarks.overhead.BotProcess`)
against the fake Bot API; every round sends one message in each chat at once. Beside it, a reader
polls the store file (read-only, every millisecond) for parts marked delivered: the window of a
part is from the moment the fake accepted its sendMessage to the first poll that saw its mark
committed. `--load N` runs N CPU-bound loops beside the bot (the kill tests' loaded case).
Printed: p50, p99 and max of the window, and how many parts were matched. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import structlog

from benchmarks.host_telegram import run_round
from benchmarks.overhead import MODELS, BotProcess, add_model, answer_for, write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram

POLL_EVERY = 0.001  # seconds between two reads of the store


class MarkWatcher:
    """Polls the store file for delivered parts; when each was first seen durable (perf_counter,
    the fake's clock: one system-wide monotonic clock on Linux)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self.seen: dict[tuple[str, str], float] = {}  # (conversation key, message id) -> time
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> MarkWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._path.exists() and not self._stop.is_set():
            time.sleep(POLL_EVERY)
        conn = sqlite3.connect(f"{self._path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            while not self._stop.is_set():
                with contextlib.suppress(sqlite3.OperationalError):  # the schema is being made
                    rows = conn.execute(
                        "SELECT conversation_key, platform_id FROM outbox WHERE state = 'delivered'"
                    ).fetchall()
                    now = time.perf_counter()
                    for key, platform_id in rows:
                        self.seen.setdefault((str(key), str(platform_id)), now)
                time.sleep(POLL_EVERY)
        finally:
            conn.close()


def _burn() -> None:
    while True:
        pass


@contextlib.contextmanager
def cpu_load(loops: int) -> Iterator[None]:
    workers = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(loops)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()


def windows(tg: FakeTelegram, seen: dict[tuple[str, str], float]) -> list[float]:
    """The window of every accepted message whose mark was seen."""
    by_id = {(key.rsplit(":", 1)[-1], pid): at for (key, pid), at in seen.items()}
    found = []
    for sent in tg.sent:
        marked = by_id.get((str(sent.chat_id), str(sent.message_id)))
        if marked is not None:
            found.append(max(0.0, marked - sent.at))
    return found


async def measure(args: argparse.Namespace, folder: Path) -> list[float]:
    async with FakeTelegram() as tg, FakeAnthropic(min_cacheable_tokens=0) as claude:
        claude.respond_with(answer_for)
        env = {"TELEGRAM_BOT_TOKEN": tg.token, "ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        server = args.model == "server"
        path = write_config(folder, "telegram", tg.base_url, claude.base_url if server else None)
        people = [tg.user(f"P{i}", "Bench", f"p{i}", user_id=20_000 + i) for i in range(args.chats)]
        pairs = [(tg.private_chat(user), user) for user in people]
        with MarkWatcher(folder / "data" / "bot.sqlite3") as watcher, cpu_load(args.load):
            async with BotProcess(path, env, instant=not server) as bot:
                for number in range(args.rounds):
                    await run_round(tg, pairs, number)
                await bot.settle()
                await asyncio.sleep(0.2)  # the last marks: committed by now, or never seen
        return windows(tg, watcher.seen)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chats", type=int, default=20, help="chats, one message each a round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--load", type=int, default=0, help="CPU-bound loops beside the bot")
    add_model(parser)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print(f"Telegram send-to-durable-mark window, load {args.load}, model: {MODELS[args.model]}")
    with tempfile.TemporaryDirectory() as folder:
        found = sorted(asyncio.run(measure(args, Path(folder))))
    if not found:
        print("no part matched")
        return
    ms = [x * 1000 for x in found]
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"window p50 {statistics.median(ms):.1f} ms   p99 {p99:.1f} ms   max {ms[-1]:.1f} ms   "
        f"parts {len(ms)} of {args.chats * args.rounds}"
    )


if __name__ == "__main__":
    main()
