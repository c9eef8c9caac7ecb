"""Extended thinking (`[model] thinking_budget`), end to end: the whole App with the Slack fake,
the notes MCP server and the Anthropic fake, which checks as the API does that a tool loop
replays the thinking block first with its signature intact. Thinking never enters history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.cli.compose import App
from bot.errors import ConfigError
from tests.channels.slack.conftest import ALICE, DM, GENERAL
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall, check_thinking, signature_of
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import MakeMcpConfig, rule_toml, server_toml

THINKING = {"BOT_MODEL__THINKING_BUDGET": "2048"}


def _history_json(entries: list[Any]) -> str:
    return json.dumps([repr(entry) for entry in entries])


async def test_a_tool_loop_replays_thinking_first_and_history_keeps_none(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    claude.script(
        Reply(
            thinking="I should search the notes.",
            tool_calls=[ToolCall("notes__search", {"query": "milk"})],
        ),
        "No notes about milk.",
    )
    async with App(
        make_mcp_config(server_toml() + rule_toml(GENERAL, ["notes__*"]), **THINKING)
    ) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "any notes on milk?"))
        [key] = await app.store.history.conversations()
        history = await app.store.history.load(key)
    first, second = claude.requests
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 4096 + 2048  # the answer's room stays whole
    replayed = second["messages"][-2]["content"]
    assert replayed[0] == {
        "type": "thinking",
        "thinking": "I should search the notes.",
        "signature": signature_of("I should search the notes."),
    }
    assert replayed[1]["type"] == "tool_use"
    assert [post["text"] for post in slack.posts] == ["No notes about milk."]
    assert "search the notes" not in _history_json(history)
    assert "Considering" not in _history_json(history)


async def test_a_surface_rule_turns_thinking_off_there(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    rule = '\n[[surfaces]]\nplatform = "slack"\nkind = "dm"\nthinking_budget = 0\n'
    async with App(make_mcp_config(server_toml() + rule, **THINKING)) as app:
        await send(slack, app, slack.dm(DM, ALICE, "hello"))
        await send(slack, app, slack.mention(GENERAL, ALICE, "hello there"))
    in_dm, in_channel = claude.requests
    assert "thinking" not in in_dm
    assert in_dm["max_tokens"] == 4096
    assert in_channel["thinking"]["budget_tokens"] == 2048


def test_the_fake_refuses_a_tool_loop_that_drops_or_alters_the_thinking() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "x", "input": {}}
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}],
    }
    body = {"max_tokens": 5000, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    altered = {"type": "thinking", "thinking": "changed", "signature": signature_of("original")}
    kept = {"type": "thinking", "thinking": "original", "signature": signature_of("original")}
    loop = [{"role": "user", "content": "q"}]
    assert check_thinking(
        {**body, "messages": [*loop, {"role": "assistant", "content": [call]}, result]}
    )
    assert check_thinking(
        {**body, "messages": [*loop, {"role": "assistant", "content": [altered, call]}, result]}
    )
    assert (
        check_thinking(
            {**body, "messages": [*loop, {"role": "assistant", "content": [kept, call]}, result]}
        )
        is None
    )


async def test_a_budget_below_the_minimum_is_a_clear_config_error(
    make_mcp_config: MakeMcpConfig,
) -> None:
    with pytest.raises(ConfigError, match="thinking_budget") as caught:
        make_mcp_config("", BOT_MODEL__THINKING_BUDGET="100")
    assert "at least 1024" in str(caught.value)
