"""`bot run` with a token the platform refuses: one clear line, exit status 2, no traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.conftest import subprocess_env
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram


async def _run(bot: list[str], agent_dir: Path, env: dict[str, str]) -> tuple[int, str]:
    base = subprocess_env()
    process = await asyncio.create_subprocess_exec(
        *bot,
        "--config",
        str(agent_dir / "bot.toml"),
        "run",
        # The model check goes to a closed loopback port unless a test points it at the fake:
        # a model API that is down only warns, and nothing here reaches outside the machine.
        env={
            **base,
            "ANTHROPIC_API_KEY": "sk-ant-run-0123456789",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            **env,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, err.decode()


async def test_a_refused_telegram_token_stops_start_up_clearly(
    bot_command: list[str], agent_dir: Path
) -> None:
    async with FakeTelegram() as tg:
        code, err = await _run(
            bot_command,
            agent_dir,
            {
                "TELEGRAM_BOT_TOKEN": "1:not-the-right-token-at-all",
                "BOT_TELEGRAM__ENABLED": "true",
                "BOT_TELEGRAM__API_URL": tg.base_url,
            },
        )
    assert code == 2
    assert "TELEGRAM_BOT_TOKEN" in err
    assert "Traceback" not in err
    assert "not-the-right-token-at-all" not in err


async def test_a_refused_slack_token_stops_start_up_clearly(
    bot_command: list[str], agent_dir: Path
) -> None:
    async with FakeSlack() as slack:
        code, err = await _run(
            bot_command,
            agent_dir,
            {
                "SLACK_BOT_TOKEN": "xoxb-not-the-right-token",
                "SLACK_APP_TOKEN": slack.app_token,
                "BOT_SLACK__ENABLED": "true",
                "BOT_SLACK__API_URL": slack.api_url,
            },
        )
    assert code == 2
    assert "SLACK_BOT_TOKEN" in err
    assert "Traceback" not in err
    assert "xoxb-not-the-right-token" not in err


async def test_a_refused_model_key_stops_start_up_before_any_channel(
    bot_command: list[str], agent_dir: Path
) -> None:
    from tests.fakes.anthropic import FakeAnthropic

    async with FakeAnthropic(api_key="the-right-key") as model, FakeTelegram() as tg:
        code, err = await _run(
            bot_command,
            agent_dir,
            {
                "ANTHROPIC_API_KEY": "sk-ant-wrong-key-0123456789",
                "ANTHROPIC_BASE_URL": model.base_url,
                "TELEGRAM_BOT_TOKEN": tg.token,
                "BOT_TELEGRAM__ENABLED": "true",
                "BOT_TELEGRAM__API_URL": tg.base_url,
            },
        )
        polled = [call for call in tg.calls if call.method == "getUpdates"]
    assert code == 2
    assert "ANTHROPIC_API_KEY" in err
    assert "Traceback" not in err
    assert "sk-ant-wrong-key-0123456789" not in err
    assert model.requests == []  # nothing was generated, only tokens counted
    assert polled == []
