"""Streaming answers into Slack and Telegram (issue 15): how soon text shows, and at what cost.

    .venv/bin/python -m benchmarks.stream [--answers N] [--chars N] [--seconds S]

The whole App runs (SQLite store in a temporary folder, host, model runtime through the anthropic
SDK) with the Slack channel (slack-bolt, Socket Mode) or the Telegram channel (python-telegram-
bot, long polling) against the fake platforms on 127.0.0.1, with their default streaming mode
(`native`) and interval (one update per message per second). The fake Anthropic API streams a
`--chars` character answer word by word over `--seconds` seconds. One conversation asks
`--answers` questions one after another: a Slack thread (native streams) and a Telegram private
chat (drafts).

Printed per platform: the time from the model's first text delta (as the fake API sends it) to
the first text visible on the platform (the fake platform accepting the call that shows it),
p50 and p99; platform calls per answer (streaming, edits, posts; not reactions or typing); the
fewest seconds between two streaming updates of one message (appends, drafts); and the time
from the event to the final message. Targets (issue 15): p50 within 300 ms; at most one call
per second per message plus start and stop. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from benchmarks.overhead import write_config
from bot.cli.compose import App
from bot.cli.settings import load_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

SLACK_CALLS = ("chat.postMessage", "chat.startStream", "chat.appendStream", "chat.stopStream")
SLACK_CALLS += ("chat.update", "chat.delete")
TELEGRAM_CALLS = ("sendMessage", "sendMessageDraft", "editMessageText", "deleteMessage")


@dataclass
class Answer:
    first_visible: float  # seconds from the model's first text to the first visible text
    calls: int
    min_gap: float  # fewest seconds between two updates of one message
    total: float  # seconds from the event to the final message


def answer_text(chars: int) -> str:
    words = "Streaming answers show **while** they are written, in `bounded` steps."
    pieces = words.split(" ")
    out: list[str] = []
    while len(" ".join(out)) < chars:
        out.append(pieces[len(out) % len(pieces)])
        if len(out) % 40 == 0:
            out.append("\n\n")
    return " ".join(out)[:chars]


def gaps(times_by_message: dict[str, list[float]]) -> float:
    found = [b - a for times in times_by_message.values() for a, b in itertools.pairwise(times)]
    return min(found) if found else float("nan")


async def slack_answers(count: int, text: str, pace: float, folder: Path) -> list[Answer]:
    async with FakeSlack() as slack, FakeAnthropic(min_cacheable_tokens=0) as claude:
        claude.respond_with(lambda body: text)
        claude.pace = pace
        slack.add_channel("C0STREAM1", "bench")
        slack.add_user("U0STREAM1", "person", real_name="Person")
        env = {
            "SLACK_BOT_TOKEN": slack.bot_token,
            "SLACK_APP_TOKEN": slack.app_token,
            "ANTHROPIC_API_KEY": "sk-ant-bench-0000",
        }
        path = write_config(folder, "slack", slack.api_url, claude.base_url)
        answers = []
        async with App(load_config(path, env=env)) as app:
            await slack.connection(30)
            root: str | None = None
            for n in range(count):
                body = slack.mention("C0STREAM1", "U0STREAM1", f"question {n}", thread_ts=root)
                root = root or str(body["event"]["ts"])
                posts, calls = len(slack.posts), len(slack.calls)
                asked = time.monotonic()
                await slack.push(body)
                await slack.wait_for(lambda n=posts: len(slack.posts) > n, within=60)
                await app.host.idle()
                mine = [c for c in slack.calls[calls:] if c.method in SLACK_CALLS]
                by_message: dict[str, list[float]] = {}
                for call in mine:
                    ts = str(call.params.get("ts") or "")
                    if ts and call.method == "chat.appendStream":  # not the stop and finish
                        by_message.setdefault(ts, []).append(call.at)
                answers.append(
                    Answer(
                        slack.posts[posts]["at"] - claude.first_text_at[n],
                        len(mine),
                        gaps(by_message),
                        max(call.at for call in mine) - asked,
                    )
                )
        return answers


async def telegram_answers(count: int, text: str, pace: float, folder: Path) -> list[Answer]:
    async with FakeTelegram() as tg, FakeAnthropic(min_cacheable_tokens=0) as claude:
        claude.respond_with(lambda body: text)
        claude.pace = pace
        person = tg.user("Person", None, "person")
        chat = tg.private_chat(person)
        env = {"TELEGRAM_BOT_TOKEN": tg.token, "ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        path = write_config(folder, "telegram", tg.base_url, claude.base_url)
        answers = []
        async with App(load_config(path, env=env)) as app:
            for n in range(count):
                calls, sent = len(tg.calls), len(tg.sent)
                asked = time.perf_counter()
                await tg.push(tg.message(chat, person, f"question {n}"))
                await tg.wait_for(lambda n=sent: len(tg.sent) > n)
                await app.host.idle()
                mine = [c for c in tg.calls[calls:] if c.method in TELEGRAM_CALLS]
                shown = min(c.at for c in mine)
                by_message: dict[str, list[float]] = {}
                for call in mine:
                    if call.method == "sendMessageDraft":  # the final message is a sendMessage
                        by_message.setdefault(str(call.params["draft_id"]), []).append(call.at)
                answers.append(
                    Answer(
                        shown - claude.first_text_at[n],
                        len(mine),
                        gaps(by_message),
                        max(call.at for call in mine) - asked,
                    )
                )
        return answers


def show(name: str, answers: list[Answer]) -> str:
    first = sorted(a.first_visible * 1000 for a in answers)
    p50 = statistics.median(first)
    p99 = first[min(len(first) - 1, int(len(first) * 0.99))]
    calls = statistics.mean(a.calls for a in answers)
    gap = min(a.min_gap for a in answers)
    total = statistics.median(a.total for a in answers)
    return (
        f"{name:<26} first visible p50 {p50:6.1f} ms  p99 {p99:6.1f} ms   "
        f"calls/answer {calls:5.1f}   min gap/message {gap:5.2f} s   "
        f"to final message p50 {total:5.2f} s"
    )


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--answers", type=int, default=10, help="answers per platform")
    parser.add_argument("--chars", type=int, default=2000, help="characters per answer")
    parser.add_argument("--seconds", type=float, default=2.0, help="the model's writing time")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    text = answer_text(args.chars)
    pace = args.seconds / max(1, len(text.split()))
    print(f"Streaming: {args.answers} answers of {len(text)} chars written over {args.seconds} s")
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        slack = await slack_answers(args.answers, text, pace, Path(one))
        print(show("slack thread (native)", slack))
        telegram = await telegram_answers(args.answers, text, pace, Path(two))
        print(show("telegram private (drafts)", telegram))


if __name__ == "__main__":
    main()
