"""Host overhead through Telegram (SPEC §12): update in to last part delivered.

    .venv/bin/python -m benchmarks.host_telegram [--turns N] [--rounds N] [--model instant|server]
                                                 [--chats N] [--warmup N]

The whole App runs (SQLite store in a temporary folder, host lanes, assembler, memory capture,
the Telegram channel on python-telegram-bot polling a fake Bot API on 127.0.0.1). The model
answers at once: `server` (default) goes through the anthropic SDK over HTTP to the fake Messages
API, streaming at the channel's default, as a user's bot does; `instant` is an extra figure from
an in-process runtime that assembles the real request and answers without I/O (every line it
prints says so).

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
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from benchmarks.overhead import (
    MODELS,
    BotProcess,
    Figures,
    add_bot_tree,
    add_model,
    add_store,
    answer_for,
    measure,
    patiently,
    store_url,
    write_config,
)
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
    await patiently(
        lambda: tg.wait_for(lambda: len({s.chat_id for s in tg.sent[before:]}) >= len(chats))
    )
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
    tg: FakeTelegram,
    bot: BotProcess,
    name: str,
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    rounds: int,
    warmup: int,
) -> Figures:
    measured = await measure(
        lambda number: run_round(tg, pairs, number), warmup, rounds, bot.settle
    )
    return measured.figures(name, len(pairs) * rounds, in_order(tg), instant=bot.instant)


async def run(args: argparse.Namespace, folder: Path) -> None:
    """Both scenarios against one bot process: one chat, then many at once."""
    server = args.model == "server"
    async with (
        FakeTelegram() as tg,
        FakeAnthropic(min_cacheable_tokens=0) as claude,
        store_url(args) as store,
    ):
        claude.respond_with(answer_for)
        env = {"TELEGRAM_BOT_TOKEN": tg.token, "ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        model_url = claude.base_url if server else None
        path = write_config(folder, "telegram", tg.base_url, model_url, store)
        people = [
            tg.user(f"Person{i}", "Bench", f"person{i}", user_id=10_000 + i)
            for i in range(1 + args.chats)
        ]
        pairs = [(tg.private_chat(user), user) for user in people]
        async with BotProcess(path, env, tree=args.bot_tree, instant=not server) as bot:
            single = await scenario(tg, bot, "1 chat", pairs[:1], args.turns, args.warmup)
            print(single.show(), flush=True)
            many = await scenario(tg, bot, f"{args.chats} chats", pairs[1:], args.rounds, 1)
            print(many.show(), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in the one-chat scenario")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the 100-chat scenario")
    add_model(parser)
    parser.add_argument("--chats", type=int, default=100, help="chats in the many scenario")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured turns first")
    add_store(parser)
    add_bot_tree(parser)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print(f"Telegram host overhead, store: {args.store}, model: {MODELS[args.model]}")
    with tempfile.TemporaryDirectory() as folder:
        await run(args, Path(folder))


if __name__ == "__main__":
    main()
