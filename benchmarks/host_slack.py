"""Host overhead through Slack (SPEC §12): event in to last part delivered.

    .venv/bin/python -m benchmarks.host_slack [--turns N] [--rounds N] [--surface thread|dm]
                                              [--model instant|server]
                                              [--conversations N] [--warmup N]

The whole App runs (SQLite store in a temporary folder, host lanes, assembler, memory capture,
the Slack channel on real slack-bolt in Socket Mode against the fake Slack on 127.0.0.1). The
model answers at once: `server` (default) goes through the anthropic SDK over HTTP to the fake
Messages API, streaming at the channel's default, as a user's bot does; `instant` is an extra
figure from an in-process runtime that assembles the real request and answers without I/O (every
line it prints says so).

Latency runs from the moment the fake Slack sends the event envelope down the websocket to the
moment it accepted the answer's last chat.postMessage. On the way: bolt's ack, the durable
event ledger, users.info / conversations.info (cached after the first turn), the thread read for
preceding messages (conversations.replies, every turn), the host's turn, and the post.

Scenarios: one conversation, turns one after another; then 100 conversations, each round one
mention in every conversation at once. A conversation is a thread under a channel mention
(`--surface thread`, the Slack case) or a DM (`--surface dm`). Printed: p50, p99, turns/s, lost
and duplicated replies, and whether each conversation's answers came back in order. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from tests.fakes.slack import FakeSlack

CHANNEL = "C0BENCH01"
ANSWER_NUMBER = re.compile(r"Answer (\d+)\.")


@dataclass
class Conversation:
    """One thread (or DM) the benchmark keeps talking in."""

    user: str
    channel: str
    dm: bool
    root: str | None = None
    answers: list[int] = field(default_factory=list)

    def event(self, slack: FakeSlack, number: int) -> dict[str, Any]:
        text = f"question {number}: what happened to the deploy?"
        if self.dm:
            return slack.dm(self.channel, self.user, text)
        body = slack.mention(self.channel, self.user, text, thread_ts=self.root)
        self.root = self.root or str(body["event"]["ts"])
        return body

    @property
    def key(self) -> tuple[str, str | None]:
        """Where this conversation's answers land: the DM's top level, or the thread."""
        return (self.channel, None if self.dm else self.root)


def landed_in(post: dict[str, Any]) -> tuple[str, str | None]:
    return (str(post["channel"]), post["thread_ts"])


def world(slack: FakeSlack, count: int, dm: bool) -> list[Conversation]:
    slack.add_channel(CHANNEL, "bench")
    conversations = []
    for i in range(count):
        user = f"U0BENCH{i:03d}"
        slack.add_user(user, f"person{i}", real_name=f"Person {i} Bench")
        channel = CHANNEL
        if dm:
            channel = f"D0BENCH{i:03d}"
            slack.add_channel(channel, kind="im")
        conversations.append(Conversation(user, channel, dm))
    return conversations


async def run_round(
    slack: FakeSlack, conversations: list[Conversation], number: int
) -> tuple[list[float], int, int]:
    """One mention in every conversation at once; latencies, lost and duplicated answers."""
    before = len(slack.posts)
    pushed: dict[tuple[str, str | None], float] = {}
    for conversation in conversations:
        body = conversation.event(slack, number)
        pushed[conversation.key] = time.monotonic()
        await slack.push(body)
    answered: set[tuple[str, str | None]] = set()
    seen = before

    def all_answered() -> bool:
        nonlocal seen
        answered.update(landed_in(post) for post in slack.posts[seen:])
        seen = len(slack.posts)
        return len(answered & pushed.keys()) == len(pushed)

    await patiently(lambda: slack.wait_for(all_answered))
    by_conversation = {c.key: c for c in conversations}
    last: dict[tuple[str, str | None], float] = {}
    count: dict[tuple[str, str | None], int] = {}
    for post in slack.posts[before:]:
        key = landed_in(post)
        last[key] = post["at"]
        count[key] = count.get(key, 0) + 1
        match = ANSWER_NUMBER.search(post["text"])
        if match and key in by_conversation:
            by_conversation[key].answers.append(int(match.group(1)))
    latencies = [last[key] - sent_at for key, sent_at in pushed.items() if key in last]
    lost = sum(1 for key in pushed if key not in last)
    duplicated = sum(n - 1 for n in count.values())
    return latencies, lost, duplicated


async def scenario(
    slack: FakeSlack,
    bot: BotProcess,
    name: str,
    conversations: list[Conversation],
    rounds: int,
    warmup: int,
) -> Figures:
    measured = await measure(
        lambda number: run_round(slack, conversations, number), warmup, rounds, bot.settle
    )
    ordered = all(c.answers == sorted(c.answers) for c in conversations)
    return measured.figures(name, len(conversations) * rounds, ordered, instant=bot.instant)


async def run(args: argparse.Namespace, folder: Path) -> None:
    """Both scenarios against one bot process: one conversation, then many at once."""
    dm, server = args.surface == "dm", args.model == "server"
    async with (
        FakeSlack() as slack,
        FakeAnthropic(min_cacheable_tokens=0) as claude,
        store_url(args) as store,
    ):
        claude.respond_with(answer_for)
        env = {
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_APP_TOKEN": slack.app_token,
            "ANTHROPIC_API_KEY": "sk-ant-bench-0000",
        }
        model_url = claude.base_url if server else None
        path = write_config(folder, "slack", slack.api_url, model_url, store)
        conversations = world(slack, 1 + args.conversations, dm)
        async with BotProcess(path, env, tree=args.bot_tree, instant=not server) as bot:
            first = conversations[:1]
            single = await scenario(slack, bot, "1 conv", first, args.turns, args.warmup)
            print(single.show(), flush=True)
            count = args.conversations
            many = await scenario(slack, bot, f"{count} convs", conversations[1:], args.rounds, 1)
            print(many.show(), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns in the one-thread scenario")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the 100-thread scenario")
    parser.add_argument("--surface", choices=["thread", "dm"], default="thread")
    add_model(parser)
    parser.add_argument("--conversations", type=int, default=100, help="in the many scenario")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured turns first")
    add_store(parser)
    add_bot_tree(parser)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    print(
        f"Slack host overhead (Socket Mode), surface: {args.surface}, store: {args.store}, "
        f"model: {MODELS[args.model]}"
    )
    with tempfile.TemporaryDirectory() as folder:
        await run(args, Path(folder))


if __name__ == "__main__":
    main()
