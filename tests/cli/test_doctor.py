"""`bot doctor` against the fake services: real subprocess, real SDK calls on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.conftest import subprocess_env
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

REPO = Path(__file__).resolve().parents[2]


async def _doctor(bot: list[str], folder: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    base = subprocess_env()
    process = await asyncio.create_subprocess_exec(
        *bot,
        "doctor",
        "--config",
        str(folder / "bot.toml"),
        env={**base, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=folder,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines()


async def _init(bot: list[str], tmp_path: Path) -> Path:
    process = await asyncio.create_subprocess_exec(
        *bot,
        "init",
        str(tmp_path / "demo"),
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert await process.wait() == 0
    return tmp_path / "demo"


async def test_doctor_checks_the_model_and_telegram_and_reports_privacy_mode(
    bot_command: list[str],
    tmp_path: Path,
) -> None:
    folder = await _init(bot_command, tmp_path)
    async with FakeAnthropic() as model, FakeTelegram() as tg:
        code, lines = await _doctor(
            bot_command,
            folder,
            {
                "ANTHROPIC_API_KEY": "sk-ant-doctor-0123456789",
                "ANTHROPIC_BASE_URL": model.base_url,
                "TELEGRAM_BOT_TOKEN": tg.token,
                "BOT_TELEGRAM__ENABLED": "true",
                "BOT_TELEGRAM__API_URL": tg.base_url,
            },
        )
    assert code == 0, lines
    model_line = next(line for line in lines if " model " in f" {line} ")
    telegram_line = next(line for line in lines if line.split()[1:2] == ["telegram"])
    assert model_line.startswith("ok")
    assert telegram_line.startswith("ok")
    assert "privacy mode off" in telegram_line
    # Which streaming mode the channel uses, and the fix should Telegram refuse drafts.
    stream_line = next(line for line in lines if line.split()[1:2] == ["telegram-stream"])
    assert "native: drafts (sendMessageDraft)" in stream_line
    assert "Fix:" in stream_line
    assert 'stream = "edits"' in stream_line
    assert tg.token not in "\n".join(lines)


async def test_doctor_says_which_key_the_model_refused(
    bot_command: list[str], tmp_path: Path
) -> None:
    folder = await _init(bot_command, tmp_path)
    async with FakeAnthropic(api_key="the-right-key") as model:
        code, lines = await _doctor(
            bot_command,
            folder,
            {"ANTHROPIC_API_KEY": "sk-ant-wrong-0123456789", "ANTHROPIC_BASE_URL": model.base_url},
        )
    assert code == 1
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1
    assert "ANTHROPIC_API_KEY" in failed[0]
    assert "sk-ant-wrong-0123456789" not in "\n".join(lines)


async def test_chat_with_a_refused_key_exits_with_the_operators_message(
    bot_command: list[str], agent_dir: Path
) -> None:
    async with FakeAnthropic(api_key="the-right-key") as model:
        env = subprocess_env(
            ANTHROPIC_API_KEY="sk-ant-wrong-0123456789", ANTHROPIC_BASE_URL=model.base_url
        )
        process = await asyncio.create_subprocess_exec(
            *bot_command, "chat", "--config", str(agent_dir / "bot.toml"),
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(b"hello\n"), 60)
    assert process.returncode == 2
    assert "refused the key" in err.decode()
    assert "ANTHROPIC_API_KEY" in err.decode()
    assert "Sorry" not in out.decode()  # not the end user's apology
    assert "sk-ant-wrong-0123456789" not in out.decode() + err.decode()


async def test_a_fresh_starter_with_slack_expects_agent_messaging_and_says_what_it_needs(
    bot_command: list[str],
    tmp_path: Path,
) -> None:
    folder = await _init(bot_command, tmp_path)
    async with FakeAnthropic() as model, FakeSlack() as slack:
        slack.revoke("commands")
        code, lines = await _doctor(
            bot_command,
            folder,
            {
                "ANTHROPIC_API_KEY": "sk-ant-doctor-0123456789",
                "ANTHROPIC_BASE_URL": model.base_url,
                "SLACK_BOT_TOKEN": slack.bot_token,
                "SLACK_APP_TOKEN": slack.app_token,
                "BOT_SLACK__ENABLED": "true",
                "BOT_SLACK__API_URL": slack.api_url,
            },
        )
    assert code == 0, lines
    messaging = next(line for line in lines if line.split()[1:2] == ["slack-messaging"])
    assert "agent: the Messages tab" in messaging
    assert "stop button" in messaging
    assert "deploy/slack-app-manifest.yaml" in messaging
    assert "/memory, /forget, /usage and /schedules" in messaging
    slack_line = next(line for line in lines if line.split()[1:2] == ["slack"])
    assert "without commands the slash commands" in slack_line
    assert slack.bot_token not in "\n".join(lines)


async def test_doctor_checks_each_provider_and_that_it_lists_the_model(
    bot_command: list[str], tmp_path: Path
) -> None:
    folder = await _init(bot_command, tmp_path)
    text = (folder / "bot.toml").read_text(encoding="utf-8")
    (folder / "bot.toml").write_text(
        text.replace("[model]\n", '[model]\nfallbacks = ["local:qwen3-32b", "local:missing-7b"]\n')
    )
    async with FakeAnthropic() as model, FakeOpenAI(api_key="sk-local-key") as local:
        with (folder / "bot.toml").open("a", encoding="utf-8") as toml:
            toml.write(
                f'\n[providers.local]\nwire = "openai"\nbase_url = "{local.base_url}"\n'
                'api_key_env = "LOCAL_API_KEY"\n'
            )
        code, lines = await _doctor(
            bot_command,
            folder,
            {
                "ANTHROPIC_API_KEY": "sk-ant-doctor-0123456789",
                "ANTHROPIC_BASE_URL": model.base_url,
                "LOCAL_API_KEY": "sk-local-key",
            },
        )
    assert code == 1, lines
    listed = next(line for line in lines if "model local:qwen3-32b " in line)
    assert listed.startswith("ok")
    assert "lists qwen3-32b" in listed
    missing = next(line for line in lines if "model local:missing-7b " in line)
    assert missing.startswith("FAIL")
    assert "does not list model 'missing-7b'" in missing
    assert "Fix:" in missing
    assert "sk-local-key" not in "\n".join(lines)
