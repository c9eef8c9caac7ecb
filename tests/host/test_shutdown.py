"""Graceful shutdown of a real `bot run` process: SIGTERM lets the running turn finish.

The host runs as a subprocess with Telegram enabled against the fake Bot API and the model
pointed at the fake Anthropic server (both in this test process, on loopback).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

from bot.cli.settings import load_config
from bot.store.sqlite import open_store
from tests.conftest import subprocess_env, write_config
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram


async def _start_bot(
    command: list[str], agent_dir: Path, fake: FakeAnthropic, tg: FakeTelegram
) -> asyncio.subprocess.Process:
    write_config(
        agent_dir,
        f"""
        [model]
        max_retries = 0

        [telegram]
        enabled = true
        api_url = "{tg.base_url}"
        poll_timeout = 1

        [host]
        shutdown_grace = 20
        """,
    )
    env = subprocess_env()
    env.update(
        ANTHROPIC_API_KEY="sk-ant-test-key-0123456789",
        ANTHROPIC_BASE_URL=fake.base_url,
        TELEGRAM_BOT_TOKEN=tg.token,
    )
    return await asyncio.create_subprocess_exec(
        *command,
        "--config",
        str(agent_dir / "bot.toml"),
        "run",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _wait_until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(20):
        while not predicate():
            await asyncio.sleep(0.02)


async def _wait_for_log(bot: asyncio.subprocess.Process, event: str) -> None:
    assert bot.stderr is not None
    async with asyncio.timeout(20):
        while line := await bot.stderr.readline():
            if f'"event": "{event}"' in line.decode():
                return
    raise AssertionError(f"the bot exited before logging {event}")


async def test_sigterm_during_a_turn_lets_it_finish_and_exits_zero(
    bot_command: list[str], agent_dir: Path
) -> None:
    async with FakeAnthropic() as fake, FakeTelegram() as tg:
        fake.stall(1.5, times=1)
        fake.script("the slow answer")
        bot = await _start_bot(bot_command, agent_dir, fake, tg)
        try:
            alice = tg.user("Alice", "Chen", "alice")
            await tg.push(tg.message(tg.private_chat(alice), alice, "please think hard"))
            await _wait_until(lambda: len(fake.requests) >= 1)  # the turn is running
            bot.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                _, stderr = await bot.communicate()
        finally:
            if bot.returncode is None:
                bot.kill()
        assert bot.returncode == 0, stderr.decode()[-2000:]
        assert [sent.plain for sent in tg.sent] == ["the slow answer"]

    config = load_config(agent_dir / "bot.toml", env={})
    store = await open_store(config.settings.store, config.settings.memory)
    try:
        keys = await store.history.conversations()
        assert len(keys) == 1
        history = await store.history.load(keys[0])
    finally:
        await store.aclose()
    assert [entry.text for entry in history] == ["please think hard", "the slow answer"]


async def test_a_second_signal_exits_at_once(bot_command: list[str], agent_dir: Path) -> None:
    async with FakeAnthropic() as fake, FakeTelegram() as tg:
        fake.hold()  # the model call never ends: only the second signal can end the process
        bot = await _start_bot(bot_command, agent_dir, fake, tg)
        try:
            alice = tg.user("Alice", "Chen", "alice")
            await tg.push(tg.message(tg.private_chat(alice), alice, "a very long job"))
            await _wait_until(lambda: len(fake.requests) >= 1)
            bot.send_signal(signal.SIGTERM)
            await _wait_for_log(bot, "shutdown_requested")  # the first signal was taken
            bot.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):  # bounds a hang, not a measure of speed
                await bot.communicate()
        finally:
            if bot.returncode is None:
                bot.kill()
            fake.release()
        assert bot.returncode == 130
        assert tg.sent == []
