"""Slack on an OpenAI-compatible model (`provider = "openai"` and a `base_url` at the fake Chat
Completions server, through the real `openai` SDK): a mention with a tool call."""

from __future__ import annotations

from bot.cli.compose import App
from tests.channels.slack.conftest import GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.conftest import openai_env
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI, Reply, ToolCall
from tests.fakes.slack import FakeSlack


async def test_a_slack_mention_with_a_tool_call_on_an_openai_model(
    slack: FakeSlack, gpt: FakeOpenAI, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    gpt.script(
        Reply(tool_calls=[ToolCall("memory_recall", {"query": "release"})]),
        "The release is on Friday.",
    )
    async with App(make_config(**openai_env(gpt))) as app:
        await send(slack, app, slack.mention(GENERAL, "U0ALICE01", "when is the release?"))
    assert [post["text"] for post in slack.posts] == ["The release is on Friday."]
    first, second = gpt.requests
    assert "memory_recall" in [tool["function"]["name"] for tool in first["tools"]]
    [call] = second["messages"][-2]["tool_calls"]
    assert second["messages"][-1]["tool_call_id"] == call["id"]
    assert claude.requests == []
