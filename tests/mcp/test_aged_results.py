"""Old tool results age (SPEC §5), end to end: the whole App with the Slack fake, the notes MCP
server over stdio and the model behind the Anthropic fake. Once history is halved, an older
result is replayed as a reference, and `tool_result_fetch` reads it back in full."""

from __future__ import annotations

import json
from typing import Any

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import MakeMcpConfig, rule_toml, server_toml

TOML = server_toml() + rule_toml(GENERAL, ["notes__*"])
BOUNDS = {"BOT_STORE__HISTORY_MESSAGES": "16", "BOT_STORE__TOOL_RESULTS_TURNS": "1"}


def _results(body: dict[str, Any]) -> dict[str, str]:
    return {
        block["tool_use_id"]: block["content"]
        for message in body["messages"]
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


async def test_an_aged_result_is_a_reference_and_can_be_fetched_again(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    async with App(make_mcp_config(TOML, **BOUNDS)) as app:
        root = slack.mention(GENERAL, ALICE, "turn 0")
        thread = root["event"]["ts"]
        for n in range(5):
            big = ToolCall("notes__big", {"size": 3000}, id=f"toolu_big_{n}")
            claude.script(Reply(tool_calls=[big]), f"answer {n}")
            await send(
                slack,
                app,
                root if n == 0 else slack.mention(GENERAL, ALICE, f"turn {n}", thread_ts=thread),
            )
        fetch = ToolCall("tool_result_fetch", {"id": "toolu_big_3"}, id="toolu_fetch")
        claude.script(Reply(tool_calls=[fetch]), "fetched")
        await send(slack, app, slack.mention(GENERAL, ALICE, "again?", thread_ts=thread))
    asked, answered = claude.requests[-2:]
    # 20 messages > 16: history kept turns 3 and 4; turn 3's result aged, turn 4's did not.
    replayed = _results(asked)
    assert set(replayed) == {"toolu_big_3", "toolu_big_4"}
    assert replayed["toolu_big_3"].startswith("[An earlier result of notes__big")
    assert 'call tool_result_fetch with id "toolu_big_3"' in replayed["toolu_big_3"]
    assert "HEAD" in replayed["toolu_big_4"]
    assert "tool_result_fetch" in [tool["name"] for tool in asked["tools"]]
    fetched = _results(answered)["toolu_fetch"]
    assert "HEAD" in fetched
    assert (
        fetched == replayed["toolu_big_4"].replace("toolu_big_4", "toolu_big_3")
        or "TAIL" in fetched
    )
    assert json.dumps(claude.requests[0]).count("tool_result_fetch") == 0  # offered only then
