"""`bot chat` piped, then `bot history show` in a new process: the conversation survived."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.conftest import subprocess_env
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
