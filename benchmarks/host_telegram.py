"""Host overhead through Telegram (SPEC §12): update in to last part delivered.

    .venv/bin/python -m benchmarks.host_telegram [--turns N] [--rounds N] [--model instant|server]
                                                 [--chats N] [--warmup N]

The whole App runs (SQLite store in a temporary folder, host lanes, assembler, memory capture,
the Telegram channel on python-telegram-bot polling a fake Bot API on 127.0.0.1). The model
answers at once: `instant` (default) is an in-process runtime that assembles the real request and
answers without I/O; `server` goes through the anthropic SDK to the fake Messages API instead.

Latency is from the moment the update is queued in the fake Bot API to the moment the fake
accepted the answer's last part. The fake's getUpdates is a true long poll: a waiting poll is
woken the instant an update is queued, so PTB's polling loop adds one local HTTP round trip,
not a poll interval (the fake caps an idle poll at one second only so that shutdown is quick).

Scenarios: one chat, turns one after another; then 100 chats, each round one message in every
chat at once. Printed: p50, p99, turns/s, lost and duplicated replies, and whether each chat's
answers came back in order. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from benchmarks.overhead import Figures, InstantModel, answer_for, measure, write_config
from bot.cli.compose import App
from bot.cli.settings import load_config
from bot.ports.model import ModelRuntime
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram


async def run_round(
    tg: FakeTelegram, chats: list[tuple[dict[str, Any], dict[str, Any]]], number: int
) -> tuple[list[float], int, int]:
    """One message in every chat at once; returns latencies, lost and duplicated answers."""
    before = len(tg.sent)
    pushed: dict[int, float] = {}
    for chat, user in chats:
        pushed[int(chat["id"])] = time.perf_counter()
        await tg.push(tg.message(chat, user, f"question {number}: what happened?"))
    with contextlib.suppress(TimeoutError):  # what never came is counted as lost below
        await tg.wait_for(lambda: len({s.chat_id for s in tg.sent[before:]}) >= len(chats))
    answers = tg.sent[before:]
    latencies = []
    per_chat: dict[int, int] = {}
    for sent in answers:
        per_chat[sent.chat_id] = per_chat.get(sent.chat_id, 0) + 1
        if per_chat[sent.chat_id] == 1:
            latencies.append(sent.at - pushed[sent.chat_id])
    lost = sum(1 for chat_id in pushed if chat_id not in per_chat)
    duplicated = sum(count - 1 for count in per_chat.values())
    return latencies, lost, duplicated


def in_order(tg: FakeTelegram) -> bool:
    numbers: dict[int, list[int]] = {}
    for sent in tg.sent:
        match = re.match(r"Answer (\d+)\.", sent.plain)
        if match:
            numbers.setdefault(sent.chat_id, []).append(int(match.group(1)))
    return all(seq == sorted(seq) for seq in numbers.values())


async def scenario(
    name: str, chats: int, rounds: int, warmup: int, use_server: bool, folder: Path
) -> Figures:
    async with FakeTelegram() as tg, FakeAnthropic(min_cacheable_tokens=0) as claude:
        claude.respond_with(answer_for)
        env = {"TELEGRAM_BOT_TOKEN": tg.token, "ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        path = write_config(
            folder, "telegram", tg.base_url, claude.base_url if use_server else None
        )
        config = load_config(path, env=env)
        model: ModelRuntime | None = None if use_server else InstantModel()
        people = [
            tg.user(f"Person{i}", "Bench", f"person{i}", user_id=10_000 + i) for i in range(chats)
        ]
        pairs = [(tg.private_chat(user), user) for user in people]
        async with App(config, model=model) as app:
            rounds_run = await measure(
                lambda number: run_round(tg, pairs, number), warmup, rounds, app.host.idle
            )
            await app.host.idle()
        return rounds_run.figures(name, chats * rounds, in_order(tg))


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in the one-chat scenario")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the 100-chat scenario")
    parser.add_argument("--model", choices=["instant", "server"], default="instant")
    parser.add_argument("--chats", type=int, default=100, help="chats in the many scenario")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured turns first")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print(f"Telegram host overhead, model: {args.model}")
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as hundred:
        server = args.model == "server"
        single = await scenario("1 chat", 1, args.turns, args.warmup, server, Path(one))
        print(single.show())
        count = args.chats
        many = await scenario(f"{count} chats", count, args.rounds, 1, server, Path(hundred))
        print(many.show())


if __name__ == "__main__":
    main()
