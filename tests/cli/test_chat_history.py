"""`bot chat` piped, then `bot history show` in a new process: the conversation survived."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

from tests.conftest import subprocess_env, write_config
from tests.fakes.anthropic import FakeAnthropic


async def _bot(
    bot: list[str], folder: Path, *args: str, stdin: str = "", env: dict[str, str]
) -> tuple[int, str]:
    base = subprocess_env()
    process = await asyncio.create_subprocess_exec(
        *bot,
        "--config",
        str(folder / "bot.toml"),
        *args,
        env={**base, **env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    assert process.returncode is not None
    return process.returncode, out.decode() + err.decode()


async def test_piped_chat_then_history_show_after_a_restart(
    bot_command: list[str], agent_dir: Path
) -> None:
    async with FakeAnthropic() as fake:
        fake.script("one", "two", "three")
        env = {"ANTHROPIC_API_KEY": "sk-ant-chat-0123456789", "ANTHROPIC_BASE_URL": fake.base_url}
        code, output = await _bot(
            bot_command,
            agent_dir,
            "chat",
            "--conversation",
            "demo",
            stdin="first\nsecond\nthird\n",
            env=env,
        )
        assert code == 0, output
        assert output.splitlines()[:3] == ["one", "two", "three"]

    code, output = await _bot(
        bot_command, agent_dir, "history", "show", "console:demo", "--json", env={}
    )
    assert code == 0, output
    entries = json.loads(output)
    assert [entry["role"] for entry in entries] == ["user", "assistant"] * 3
    texts = [entry["blocks"][0]["text"] for entry in entries]
    assert texts == ["first", "one", "second", "two", "third", "three"]


async def test_a_piped_chat_whose_reader_went_away_stops_asking_the_model(agent_dir: Path) -> None:
    # `bot chat < questions.txt | head -1`: once nobody reads the answers, the rest of the input
    # is not sent to the model (cost is a resource too, SPEC §11), and nothing crashes.
    # A process of its own: the warm server's forks keep their streams differently.
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write fails with EPIPE
    async with FakeAnthropic() as fake:
        env = {"ANTHROPIC_API_KEY": "sk-ant-chat-0123456789", "ANTHROPIC_BASE_URL": fake.base_url}
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot.cli", "--config", str(agent_dir / "bot.toml"),
                "chat", "--conversation", "gone",
                env={**subprocess_env(), **env},
                stdin=asyncio.subprocess.PIPE,
                stdout=write,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        finally:
            os.close(write)
        _, err = await asyncio.wait_for(process.communicate(b"one\ntwo\nthree\n"), 60)
        asked = len(fake.requests)
    assert asked == 1, "only the turn that found the reader gone"
    assert "Traceback" not in err.decode()
    assert process.returncode == 0  # it stopped early, as asked: nothing went wrong


async def test_a_piped_chat_whose_model_times_out_exits_non_zero_and_the_call_is_charged(
    bot_command: list[str], agent_dir: Path
) -> None:
    """A script can tell a turn went unanswered (exit 1, one line on stderr saying why), and the
    call that streamed and then timed out is in `bot usage`: the API billed it."""
    write_config(agent_dir, "[model]\ntimeout = 0.5\nmax_retries = 0\n")
    async with FakeAnthropic() as fake:
        fake.script("word " * 400)
        fake.words_per_delta = 1
        fake.hold_midway()  # the answer stops after its first words, so the call times out
        env = {"ANTHROPIC_API_KEY": "sk-ant-chat-0123456789", "ANTHROPIC_BASE_URL": fake.base_url}
        process = await asyncio.create_subprocess_exec(
            *bot_command,
            "--config",
            str(agent_dir / "bot.toml"),
            "chat",
            env={**subprocess_env(), **env},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(b"tell me a long story\n"), 60)
        fake.release_midway()
    assert process.returncode == 1
    # One line a script can read: the retries' and timeout's warnings go to the log file.
    [line] = err.decode().strip().splitlines()
    assert line.startswith("bot chat: 1 of 1 messages got no answer (")
    assert "Fix:" in line
    [turn_id] = re.findall(r"`bot turns show (\w+)`", line)
    with sqlite3.connect(agent_dir / "data" / "bot.sqlite3") as db:  # the id its record has
        assert db.execute("SELECT 1 FROM turn_records WHERE turn_id = ?", (turn_id,)).fetchone()
    assert " in conversation console:" in line
    assert str(agent_dir / "data" / "chat.log") in line
    assert "model_call" in (agent_dir / "data" / "chat.log").read_text()

    code, output = await _bot(bot_command, agent_dir, "usage", "--json", env={})
    assert code == 0, output
    [*_, total] = json.loads(output)
    assert total["turns"] == 1
    assert total["input_tokens"] > 0
    assert total["output_tokens"] > 0
