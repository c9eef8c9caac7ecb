"""MCP tools over streamable HTTP (the notes server in its own process on loopback), through the
Telegram fake: the bearer header from `headers_env`, and a tool list re-read when the server
says it changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli.compose import App
from bot.cli.settings import Config, load_config
from tests.channels.telegram.conftest import tg  # noqa: F401
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.telegram import FakeTelegram
from tests.mcp.conftest import SECRET, CallLog, server_toml
from tests.waiting import until

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

RULE = '\n[[surfaces]]\nplatform = "telegram"\nkind = "dm"\ntools = ["notes__*"]\n'


def config(agent_dir: Path, tg: FakeTelegram, claude: FakeAnthropic, url: str) -> Config:  # noqa: F811
    write_config(
        agent_dir,
        f'[model]\nmax_retries = 0\n\n[telegram]\nenabled = true\napi_url = "{tg.base_url}"\n'
        + server_toml(url=url)
        + RULE,
    )
    environment = {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": claude.base_url,
        "TELEGRAM_BOT_TOKEN": tg.token,
        "NOTES_AUTH": f"Bearer {SECRET}",
    }
    return load_config(agent_dir / "bot.toml", env=environment)


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body.get("tools", [])]


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


async def test_an_http_server_gets_its_bearer_header_and_its_new_tools_are_offered(
    agent_dir: Path,
    tg: FakeTelegram,  # noqa: F811
    claude: FakeAnthropic,
    http_notes: str,
    call_log: CallLog,
) -> None:
    alice = tg.user("Alice", "Chen", "alice", user_id=42)
    chat = tg.private_chat(alice)
    claude.script(
        Reply(tool_calls=[ToolCall("notes__auth"), ToolCall("notes__grow")]),
        "Checked.",
        Reply(tool_calls=[ToolCall("notes__extra")]),
        "Used the new one.",
    )
    async with App(config(agent_dir, tg, claude, http_notes)) as app:
        await tg.push(tg.message(chat, alice, "check the notes server"))
        await tg.wait_sent(1)
        await app.host.idle()
        assert app.mcp is not None
        await until(lambda: "notes__extra" in [t.spec.name for t in app.mcp.tools()])
        await tg.push(tg.message(chat, alice, "and the new tool?"))
        await tg.wait_sent(2)
        await app.host.idle()
    auth, grow = results(claude.requests[1])
    assert "authorized" in auth["content"]
    assert "not authorized" not in auth["content"]
    assert "grown" in grow["content"]
    assert "notes__extra" not in tool_names(claude.requests[0])
    assert "notes__extra" in tool_names(claude.requests[2])
    [extra] = results(claude.requests[3])
    assert "extra!" in extra["content"]
    assert SECRET not in json.dumps(claude.requests)
    assert call_log.tools() == ["auth", "grow"]  # `extra` was added without a record of its own
