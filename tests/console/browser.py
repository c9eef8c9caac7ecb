"""A real `bot run` (a fork of the warm server) with Slack against the fake, the model against the
fake Messages API, the MCP notes server and the console on, and a headless Chromium (Debian's
package, never a downloaded browser) driven by Playwright: the world the browser tests share,
one per test module."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import IDENTITY, subprocess_env
from tests.console.rig import PASSWORD, password_hash
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import SECRET, CallLog, free_port, rule_toml, server_toml
from tests.warmbot.bots import Bots

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
ALICE = "U0ALICE01"
BOB = "U0BOB0001"
GENERAL = "C0GENERAL"
HOSTILE_NAME = 'Alice <img src=x onerror="alert(1)"> Chen'
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def require_chromium() -> None:
    """Skip (with the reason) where the browser is missing, except in CI, where it must be."""
    if CHROMIUM.exists():
        return
    if os.environ.get("CI"):
        pytest.fail(
            f"{CHROMIUM} is missing in CI. Fix: apt-get install -y chromium (.ci/run does it)."
        )
    pytest.skip(f"the console's browser tests need Debian's chromium ({CHROMIUM} is missing)")


@dataclass
class World:
    claude: FakeAnthropic
    slack: FakeSlack
    calls: CallLog
    config: Path
    env: dict[str, str]
    base: str  # http://127.0.0.1:PORT/console
    browser: Any  # playwright's Browser


def _config(folder: Path, slack: FakeSlack) -> Path:
    (folder / "IDENTITY.md").write_text(IDENTITY, encoding="utf-8")
    text = f"""
[agent]
identity_path = "IDENTITY.md"
timezone = "UTC"

[store]
path = "data/bot.sqlite3"

[model]
max_retries = 0

[slack]
enabled = true
api_url = "{slack.api_url}"
stream = "off"

[budget]
daily_usd = 5.0

[approvals]
approvers = ["slack:{BOB}"]

[console]
enabled = true

[[console.operators]]
name = "ada"
password_hash = "{password_hash()}"
approver = "slack:{BOB}"
"""
    path = folder / "bot.toml"
    path.write_text(text + server_toml() + rule_toml(GENERAL, ["notes__*"]), encoding="utf-8")
    return path


async def _healthy(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(60):
            while True:
                try:
                    async with session.get(url) as response:
                        if response.status in (200, 503):
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)


@asynccontextmanager
async def world(bot_command: list[str], folder: Path) -> AsyncIterator[World]:
    from playwright.async_api import async_playwright

    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    async with FakeAnthropic() as claude, FakeSlack() as slack:
        slack.add_user(ALICE, "alice", real_name=HOSTILE_NAME)
        slack.add_user(BOB, "bob", real_name="Bob Stone")
        slack.add_channel(GENERAL, "general")
        config = _config(folder, slack)
        port = free_port()
        calls = CallLog(folder / "calls.jsonl")
        env = subprocess_env(
            ANTHROPIC_API_KEY="sk-ant-test-key-0123456789",
            ANTHROPIC_BASE_URL=claude.base_url,
            SLACK_BOT_TOKEN=slack.bot_token,
            SLACK_APP_TOKEN=slack.app_token,
            NOTES_CALLS=str(calls.path),
            NOTES_TOKEN=SECRET,
            BOT_HTTP__ENABLED="true",
            BOT_HTTP__PORT=str(port),
            BOT_LOGGING__LEVEL="warning",
        )
        log = await asyncio.to_thread(open, folder / "bot.log", "ab")
        try:
            async with Bots(bot_command, env, output=log) as bots, async_playwright() as pw:
                await bots.start("--config", str(config), "run")
                # The browser starts while the host does.
                browser, _ = await asyncio.gather(
                    pw.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS),
                    _healthy(f"http://127.0.0.1:{port}/healthz"),
                )
                base = f"http://127.0.0.1:{port}/console"
                try:
                    yield World(claude, slack, calls, config, env, base, browser)
                finally:
                    await browser.close()
        finally:
            log.close()


async def signed_in(world: World) -> Any:
    """A new browser context (its own cookies) signed in as ada; returns its page."""
    context = await world.browser.new_context(viewport={"width": 1100, "height": 900})
    page = await context.new_page()
    await page.goto(world.base + "/")
    await page.fill("#username", "ada")
    await page.fill("#password", PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_selector("text=signed in as")
    return page


async def shoot(page: Any, name: str) -> None:
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
