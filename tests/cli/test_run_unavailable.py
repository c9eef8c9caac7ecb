"""`bot run` with a platform that cannot be used at start (SPEC §11, issue 38's two start-up
tracebacks): a Telegram Bot API that fails getMe, a Slack API URL answering a body that is not
JSON. The real `bot run` in its own process keeps running: one clear line says what is down and
how to fix it, `/healthz` names the part that is down and why, the channel is tried again until
it comes up, and SIGTERM ends it cleanly; never a traceback, never an exit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.conftest import subprocess_env, write_config
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.mcp.conftest import free_port, hostile_toml
from tests.waiting import GUARD


class Run:
    """A `bot run` subprocess with the HTTP port on, its log lines read as they come."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.lines: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.lines.append(line.decode(errors="replace"))

    async def logged(self, event: str) -> dict[str, Any]:
        """The first JSON log line of `event`, once it is written."""
        async with asyncio.timeout(GUARD):
            while True:
                for line in self.lines:
                    if line.startswith("{") and json.loads(line)["event"] == event:
                        return dict(json.loads(line))
                if self.process.returncode is not None:
                    raise AssertionError(f"bot run ended ({self.process.returncode}): {self.text}")
                await asyncio.sleep(0.02)

    async def health(self) -> tuple[int, dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}/healthz") as response,
        ):
            return response.status, await response.json()

    async def healthy(self) -> dict[str, Any]:
        async with asyncio.timeout(GUARD):
            while True:
                status, body = await self.health()
                if status == 200:
                    return body
                await asyncio.sleep(0.05)

    async def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.process.wait(), GUARD)
        await self._reader
        return code

    @property
    def text(self) -> str:
        return "".join(self.lines)


@contextlib.asynccontextmanager
async def bot_run(bot: list[str], agent_dir: Path, env: dict[str, str]) -> AsyncIterator[Run]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *bot,
        "--config",
        str(agent_dir / "bot.toml"),
        "run",
        env=subprocess_env(
            ANTHROPIC_API_KEY="sk-ant-run-0123456789",
            ANTHROPIC_BASE_URL="http://127.0.0.1:9",  # down: that only warns
            BOT_HTTP__ENABLED="true",
            BOT_HTTP__PORT=str(port),
            BOT_LOGGING__FORMAT="json",
            **env,
        ),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    run = Run(process, port)
    try:
        yield run
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_telegram_failing_get_me_leaves_bot_run_up_and_it_connects_once_it_answers(
    bot_command: list[str], agent_dir: Path
) -> None:
    """With a bad MCP server besides (10,000 tools: refused), which the host serves without."""
    write_config(agent_dir, hostile_toml("huge", "tools", "10000", env=()))
    async with FakeTelegram() as tg:
        tg.fail("getMe", status=502, description="Bad Gateway", times=1000)
        env = {
            "TELEGRAM_BOT_TOKEN": tg.token,
            "BOT_TELEGRAM__ENABLED": "true",
            "BOT_TELEGRAM__API_URL": tg.base_url,
        }
        async with bot_run(bot_command, agent_dir, env) as run:
            down = await run.logged("channel_unavailable")
            status, body = await run.health()
            tg.heal("getMe")
            up = await run.healthy()
            code = await run.stop()
    assert down["channel"] == "telegram"
    assert "getMe" in down["error"]
    assert "Fix:" in down["error"]
    assert status == 503
    assert body["channels"] == {"telegram": False}
    assert body["down"]["telegram"] == down["error"]
    assert up["channels"] == {"telegram": True}
    assert up["mcp"] == {"huge": False}
    assert list(up["down"]) == ["mcp:huge"]  # a server down costs its tools only: still ok
    assert "max_tools = 128" in up["down"]["mcp:huge"]
    assert code == 0
    assert "Traceback" not in run.text
    assert tg.token not in run.text


async def not_slack(request: web.Request) -> web.Response:
    """What a misconfigured proxy might answer: a page, labelled as JSON."""
    return web.Response(text="<html>gateway</html>", content_type="application/json")


async def test_a_slack_url_answering_garbage_leaves_bot_run_up_and_says_so_in_one_line(
    bot_command: list[str], agent_dir: Path
) -> None:
    garbage = web.Application()
    garbage.router.add_route("*", "/{tail:.*}", not_slack)
    runner = web.AppRunner(garbage)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with FakeSlack() as slack:
            env = {
                "SLACK_BOT_TOKEN": slack.bot_token,
                "SLACK_APP_TOKEN": slack.app_token,
                "BOT_SLACK__ENABLED": "true",
                "BOT_SLACK__API_URL": f"http://127.0.0.1:{port}/api/",
            }
            async with bot_run(bot_command, agent_dir, env) as run:
                down = await run.logged("channel_unavailable")
                status, body = await run.health()
                code = await run.stop()
    finally:
        await runner.cleanup()
    assert down["channel"] == "slack"
    assert "not Slack's API" in down["error"]
    assert "Fix: check slack.api_url" in down["error"]
    assert status == 503
    assert body["channels"] == {"slack": False}
    assert "not Slack's API" in body["down"]["slack"]
    assert code == 0
    assert "Traceback" not in run.text
    assert slack.bot_token not in run.text
