"""`bot run` with a token the platform refuses: one clear line, exit status 2, no traceback."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram


async def _run(agent_dir: Path, env: dict[str, str]) -> tuple[int, str]:
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "BOT_", "SLACK_", "TELEGRAM_"))
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "--config",
        str(agent_dir / "bot.toml"),
        "run",
        env={**base, "ANTHROPIC_API_KEY": "sk-ant-run-0123456789", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, err.decode()


async def test_a_refused_telegram_token_stops_start_up_clearly(agent_dir: Path) -> None:
    async with FakeTelegram() as tg:
        code, err = await _run(
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


async def test_a_refused_slack_token_stops_start_up_clearly(agent_dir: Path) -> None:
    async with FakeSlack() as slack:
        code, err = await _run(
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
