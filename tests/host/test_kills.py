"""Exactly once through SIGKILL: `bot run` killed at random points while Slack and Telegram
traffic flows, then started again, many times in a row.

The host runs as the real CLI, forked from the warm server (tests/warmbot: everything imported
once, so a life costs a start-up, not an interpreter), against the fake Slack (Socket
Mode), the fake Telegram (long polling) and the fake Anthropic API in this process. Slack retries
an event whose ack never came, as the real Slack does; Telegram keeps every update until the
bot's getUpdates offset confirms it. At the end every event must have been answered: exactly once
on Slack (a post that went through before a kill is found by its metadata), at most twice on
Telegram and only as the same part sent again right after a restart (the one window SPEC §11
names), each conversation's answers in order, history whole, and the database intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.cli.settings import load_config
from bot.store.sql.request_codec import decode_request
from bot.store.sqlite import open_store
from channels.slack.deliver import SlackDeliverer
from channels.telegram.format import to_telegram_html
from channels.telegram.split import TELEGRAM_MESSAGE_LIMIT, split_html
from tests.channels.slack.test_streaming import long_answer
from tests.conftest import subprocess_env, write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import TEAM, FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.warmbot.bots import Bots

# Seconds between the fake model's word deltas: its answers stream into Slack (an edited post at a
# DM's top level) and Telegram (drafts) while they are written; what is counted is what the
# platforms show at the end (the fakes' `posts` and `sent` follow edits and streams).
STREAM_PACE = 0.02
# The suite kills five times, to stay fast; KILL_TEST_KILLS=50 (KILL_TEST_SEED) for the long run.
KILLS = int(os.environ.get("KILL_TEST_KILLS", "5"))
SEED = os.environ.get("KILL_TEST_SEED", "20261201")
QUESTION = re.compile(r"question (\d+)")
ANSWER = re.compile(r"Answer (\d+)\.")


def answer(body: dict[str, Any]) -> str:
    """The person's own text is the last "question N" of the last user message."""
    found = QUESTION.findall(str(body["messages"][-1]))
    return f"Answer {found[-1] if found else '?'}."


@dataclass
class World:
    slack: FakeSlack
    tg: FakeTelegram
    slack_dms: list[tuple[str, str]] = field(default_factory=list)  # (channel, user)
    tg_users: list[dict[str, Any]] = field(default_factory=list)
    asked: dict[str, list[int]] = field(default_factory=dict)  # conversation -> questions
    slack_bodies: list[dict[str, Any]] = field(default_factory=list)
    numbers: Any = None

    def __post_init__(self) -> None:
        self.numbers = iter(range(1, 1_000_000))
        for n in range(2):
            channel, user = f"D0KILL{n:03d}", f"U0KILL{n:03d}"
            self.slack.add_user(user, f"person{n}", real_name=f"Person {n}")
            self.slack.add_channel(channel, kind="im")
            self.slack_dms.append((channel, user))
            self.tg_users.append(self.tg.user(f"Tele{n}", None, f"tele{n}"))

    async def ask_slack(self, rng: random.Random) -> None:
        channel, user = rng.choice(self.slack_dms)
        number = next(self.numbers)
        body = self.slack.dm(channel, user, f"question {number}")
        self.asked.setdefault(f"slack:{channel}", []).append(number)
        self.slack_bodies.append(body)
        await self.slack.push(body)

    async def ask_telegram(self, rng: random.Random) -> None:
        user = rng.choice(self.tg_users)
        number = next(self.numbers)
        self.asked.setdefault(f"telegram:{user['id']}", []).append(number)
        await self.tg.push(self.tg.message(self.tg.private_chat(user), user, f"question {number}"))

    def count(self) -> int:
        """Questions asked so far."""
        return sum(len(asked) for asked in self.asked.values())

    def answers(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for post in self.slack.posts:
            found.setdefault(f"slack:{post['channel']}", []).extend(_numbers(post["text"]))
        for sent in self.tg.sent:
            found.setdefault(f"telegram:{sent.chat_id}", []).extend(_numbers(sent.plain))
        return found


def _number(body: dict[str, Any]) -> int:
    return int(QUESTION.findall(str(body["event"]["text"]))[-1])


def _numbers(text: str) -> list[int]:
    return [int(n) for n in ANSWER.findall(text)]


@contextlib.asynccontextmanager
async def lives(bot_command: list[str], env: dict[str, str]) -> AsyncIterator[Bots]:
    """`bot run` lives with these settings; KILL_TEST_LOG=FILE keeps their logs (at info level)
    for a failure's post-mortem."""
    log = await asyncio.to_thread(open, os.environ.get("KILL_TEST_LOG", os.devnull), "ab")
    try:
        async with Bots(bot_command, subprocess_env(**env), output=log) as bots:
            yield bots
    finally:
        log.close()


def environment(fake: FakeAnthropic, slack: FakeSlack, tg: FakeTelegram) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "TELEGRAM_BOT_TOKEN": tg.token,
        "BOT_STORE__HISTORY_MESSAGES": "1000",  # every turn stays, so all can be checked
        "BOT_LOGGING__LEVEL": "info" if os.environ.get("KILL_TEST_LOG") else "warning",
    }


FAST_STREAMS = "stream_interval = 0.3\n"


def configure(agent_dir: Path, slack: FakeSlack, tg: FakeTelegram, streaming: str = "") -> Path:
    return write_config(
        agent_dir,
        f"""
        [model]
        max_retries = 0

        [memory]
        enabled = false

        [slack]
        enabled = true
        api_url = "{slack.api_url}"
        {streaming}

        [telegram]
        enabled = true
        api_url = "{tg.base_url}"
        poll_timeout = 1
        {streaming}
        {streaming.replace("stream_interval", "group_stream_interval")}

        [host]
        turns_per_person_per_minute = 0
        queue_per_conversation = 1000
        shutdown_grace = 5

        [logging]
        level = "warning"
        """,
    )


@pytest.mark.slow
async def test_many_sigkills_lose_nothing_acknowledged_and_answer_once(
    bot_command: list[str], agent_dir: Path
) -> None:
    rng = random.Random(SEED)
    async with FakeAnthropic() as fake, FakeSlack() as slack, FakeTelegram() as tg:
        fake.respond_with(answer)
        fake.pace = STREAM_PACE  # answers are written slowly enough to stream (and be killed)
        world = World(slack, tg)
        config = configure(agent_dir, slack, tg)
        run = ("--config", str(config), "run")
        async with lives(bot_command, environment(fake, slack, tg)) as bots:
            for _ in range(KILLS):
                answered = len(slack.posts) + len(tg.sent)
                bot = await bots.start(*run)
                if rng.random() < 0.75:  # else: killed while it starts, resumes or connects
                    await slack.connection(30)
                if rng.random() < 0.5:  # a life that gets somewhere before it is killed
                    await _progress(world, answered)
                await _traffic(world, rng, rng.uniform(0.05, 0.5))
                assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL  # not ended by itself
            # A last, calm life: Slack retries what was never acknowledged, everything drains.
            bot = await bots.start(*run)
            for body in world.slack_bodies:
                if not _acked(slack, body):
                    await slack.push(body, retry_attempt=1)
            await _settled(world)
            assert await bot.stop(signal.SIGTERM) == 0
    order = await _check_store(agent_dir, world)
    _check_answers(world, order, KILLS)


@pytest.mark.slow
async def test_sigterm_while_traffic_keeps_arriving_loses_nothing(
    bot_command: list[str], agent_dir: Path
) -> None:
    """SIGTERM in the middle of steady traffic that goes on through the shutdown and after the
    exit: what was acknowledged is answered (before the exit, or after the restart), what was not
    is delivered again by the platform, and nothing is answered twice, on Telegram either (a
    graceful stop marks every part it posts)."""
    rng = random.Random(SEED)
    async with FakeAnthropic() as fake, FakeSlack() as slack, FakeTelegram() as tg:
        fake.respond_with(answer)
        fake.pace = STREAM_PACE  # answers are written slowly enough to stream (and be killed)
        world = World(slack, tg)
        config = configure(agent_dir, slack, tg)
        run = ("--config", str(config), "run")
        async with lives(bot_command, environment(fake, slack, tg)) as bots:
            bot = await bots.start(*run)
            await slack.connection(30)
            for _ in range(4):  # the bot is busy: questions asked and answers on their way
                await world.ask_slack(rng)
                await world.ask_telegram(rng)
            await _progress(world, 0)
            asked = world.count()
            traffic = asyncio.create_task(_traffic(world, rng, 1.5))
            async with asyncio.timeout(10):  # the stop comes while questions keep coming
                while world.count() < asked + 2:
                    await asyncio.sleep(0.01)
            assert await bot.stop(signal.SIGTERM) == 0
            await traffic  # and they went on arriving after the exit
            bot = await bots.start(*run)
            for body in world.slack_bodies:
                if not _acked(slack, body):
                    await slack.push(body, retry_attempt=1)
            await _settled(world)
            assert await bot.stop(signal.SIGTERM) == 0
    order = await _check_store(agent_dir, world)
    _check_answers(world, order, kills=0)


@pytest.mark.slow
async def test_a_long_answer_killed_mid_stream_arrives_whole_and_once_after_the_restart(
    bot_command: list[str], agent_dir: Path
) -> None:
    """Done-when of issue 15: a long answer streaming into a Slack thread (native streams) and a
    Telegram group (an edited message) when the process is SIGKILLed; after the restart the turn
    runs again, finishes the messages the first run opened and posts the rest: every part of
    the final render once, in order, nothing removed, nothing twice."""
    text = long_answer()
    async with FakeAnthropic() as fake, FakeSlack() as slack, FakeTelegram() as tg:
        fake.respond_with(lambda body: text)
        fake.pace, fake.words_per_delta = 0.01, 10
        slack.add_user("U0KILL001", "person", real_name="Person")
        slack.add_channel("C0KILL001", "general")
        person = tg.user("Tele", None, "tele")
        group = tg.supergroup(-1_009_988_776_655, "Team")
        config = configure(agent_dir, slack, tg, streaming=FAST_STREAMS)
        # The first update after each message opened waits: the kill comes while it does.
        slack.hold("chat.appendStream")
        tg.hold("editMessageText")
        run = ("--config", str(config), "run")
        async with lives(bot_command, environment(fake, slack, tg)) as bots:
            bot = await bots.start(*run)
            await slack.connection(30)
            await slack.push(slack.mention("C0KILL001", "U0KILL001", "tell me everything"))
            await tg.push(tg.message(group, person, "tell me everything", mention=True))
            await slack.wait_for(lambda: "chat.appendStream" in slack.held, 30)
            await tg.wait_for(lambda: "editMessageText" in tg.held)
            assert await bot.stop(signal.SIGKILL) == -signal.SIGKILL  # not ended by itself
            slack.release("chat.appendStream")
            tg.release("editMessageText")
            bot = await bots.start(*run)
            slack_parts = SlackDeliverer(None, stream="off").render(None, text)  # type: ignore[arg-type]
            tg_parts = split_html(to_telegram_html(text), TELEGRAM_MESSAGE_LIMIT)
            async with asyncio.timeout(60):
                while [p["text"] for p in slack.posts] != slack_parts or [
                    s.text for s in tg.sent
                ] != tg_parts:
                    await asyncio.sleep(0.05)
            assert await bot.stop(signal.SIGTERM) == 0
    assert len(slack_parts) >= 2
    assert [p["text"] for p in slack.posts] == slack_parts
    assert slack.posts[0].get("stream")  # the first run's stream, finished, not posted again
    assert not slack.deleted
    assert [s.text for s in tg.sent] == tg_parts
    assert not tg.deleted


async def _traffic(world: World, rng: random.Random, seconds: float) -> None:
    """Ask a few questions at random moments during one life."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        await asyncio.sleep(min(left, rng.uniform(0.0, 0.15)))
        if rng.random() < 0.5:
            with contextlib.suppress(TimeoutError, ConnectionError):
                await asyncio.wait_for(world.ask_slack(rng), max(left, 0.01))
        else:
            await world.ask_telegram(rng)


async def _progress(world: World, answered: int) -> None:
    """Wait (a little) until this life has posted an answer, when there is one to post."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            while len(world.slack.posts) + len(world.tg.sent) <= answered:
                await asyncio.sleep(0.02)


def _acked(slack: FakeSlack, body: dict[str, Any]) -> bool:
    return any(e.body is body and e.envelope_id in slack.acks for e in slack.envelopes)


async def _settled(world: World) -> None:
    """Wait until every question has its answer. The checks come after the bot has exited, so a
    duplicate, if the bot posted one, is in by then."""

    def done() -> bool:
        answered = world.answers()
        return all(set(asked) <= set(answered.get(key, [])) for key, asked in world.asked.items())

    try:
        async with asyncio.timeout(60):
            while not done():
                await asyncio.sleep(0.05)
    except TimeoutError:
        answered = world.answers()
        missing = {k: sorted(set(a) - set(answered.get(k, []))) for k, a in world.asked.items()}
        raise AssertionError(f"never answered: {missing}") from None


def _check_answers(world: World, order: dict[str, list[int]], kills: int) -> None:
    """Every question answered in the order its event was stored (the inbox's order: a Slack
    event whose ack was lost is redelivered later, but keeps the place of its first storing)."""
    answers = world.answers()
    resent = 0
    for key, asked in world.asked.items():
        assert sorted(order[key]) == sorted(asked), f"{key}: asked {asked}, stored {order[key]}"
        asked, got = order[key], answers[key]
        if key.startswith("slack:"):
            assert got == asked, f"{key}: asked {asked}, answered {got}"
            continue
        # Telegram: a part sent just before a kill, not yet marked, may be sent once more.
        deduped = [n for i, n in enumerate(got) if i == 0 or got[i - 1] != n]
        assert deduped == asked, f"{key}: asked {asked}, answered {got}"
        resent += len(got) - len(deduped)
    assert resent <= kills


async def _check_store(agent_dir: Path, world: World) -> dict[str, list[int]]:
    """Check the store is whole; return each conversation's questions in inbox order."""
    config = load_config(agent_dir / "bot.toml", env={})
    store = await open_store(config.settings.store, config.settings.memory)
    try:
        assert await store.db.integrity_check() == "ok"
        assert await store.inbox.pending() == []
        assert await store.outbox.undelivered() == []
        order: dict[str, list[int]] = {}
        for row in await store.db.fetch_all(
            "SELECT conversation_key, request FROM inbox ORDER BY id"
        ):
            key = str(row["conversation_key"]).replace(f":{TEAM}", "")
            text = decode_request(row["request"]).text
            order.setdefault(key, []).extend(int(n) for n in QUESTION.findall(text))
        stored = 0
        for key in await store.history.conversations():
            entries = await store.history.load(key)
            stored += len(entries) // 2
            texts = [entry.text for entry in entries]
            numbers = [int(n) for n in QUESTION.findall(" ".join(texts[0::2]))]
            assert texts[1::2] == [f"Answer {n}." for n in numbers], key
            assert numbers == order[key.replace(f":{TEAM}", "")], key
        assert stored == sum(len(asked) for asked in world.asked.values())
        return order
    finally:
        await store.aclose()
