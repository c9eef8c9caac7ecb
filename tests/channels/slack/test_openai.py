"""Slack on an OpenAI-compatible model (`provider = "openai"` and a `base_url` at the fake Chat
Completions server, through the real `openai` SDK): a mention with a tool call, and a long answer
streamed from the SSE chunks into Slack's own streams."""

from __future__ import annotations

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send, settle
from tests.channels.slack.test_streaming import FAST, expected, long_answer, methods
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


async def test_a_long_answer_from_an_openai_model_streams_natively_in_the_thread(
    slack: FakeSlack, gpt: FakeOpenAI, claude: FakeAnthropic, make_config: MakeConfig
) -> None:
    text = long_answer()
    gpt.script(text)
    gpt.hold_midway()  # until the first stream opens: a fast model could finish before it
    async with App(make_config(FAST, **openai_env(gpt))) as app:
        body = slack.mention(GENERAL, ALICE, "tell me everything")
        envelope = await slack.push(body)
        await slack.wait_for(lambda: "chat.startStream" in methods(slack))
        gpt.release_midway()
        await settle(slack, app, envelope)
    parts = expected(slack, text)
    assert [post["text"] for post in slack.posts] == parts  # each part once, in order
    assert {post["thread_ts"] for post in slack.posts} == {body["event"]["ts"]}
    assert slack.posts[0].get("stream")
    assert "chat.stopStream" in methods(slack)  # opened on the first chunk, finished whole
    [request] = gpt.requests
    assert request["stream"] is True
    assert claude.requests == []
