"""An approval on Slack with the model on an OpenAI-compatible server: the model's streamed
`tool_calls` ask for the notes server's destructive `delete`, the card waits, the approver's
press runs it once, and the result goes back as a `tool` message for the answer."""

from __future__ import annotations

from bot.cli.compose import App
from channels.slack.approvals import APPROVE_ACTION
from tests.channels.slack.conftest import ALICE, BOB, GENERAL
from tests.channels.slack.test_scenarios import send, slack_channel
from tests.conftest import openai_env
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.openai import FakeOpenAI, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, rule_toml, server_toml
from tests.mcp.test_slack_approvals import buttons, card_of
from tests.waiting import until

TOML = (
    server_toml()
    + rule_toml(GENERAL, ["notes__*"])
    + f'\n[approvals]\napprovers = ["slack:{BOB}"]\n'
)


async def test_an_approved_tool_call_on_an_openai_model_runs_once(
    slack: FakeSlack,
    gpt: FakeOpenAI,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    call_log: CallLog,
) -> None:
    gpt.script(
        Reply(tool_calls=[ToolCall("notes__delete", {"text": "milk"})]),
        "It waits for approval.",
        "Deleted the milk note.",
    )
    async with App(make_mcp_config(TOML, **openai_env(gpt))) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "delete the milk note"))
        card = card_of(slack)
        assert "delete" not in call_log.tools()
        value = buttons(card)[APPROVE_ACTION]
        envelope = await slack.push_interactive(
            slack.block_action(card, BOB, APPROVE_ACTION, value)
        )
        await slack.acked(envelope)
        await until(lambda: len(gpt.requests) >= 3)
        await slack_channel(app).drain()
        await app.host.idle()
    assert [(c["tool"], c["arguments"]) for c in call_log.calls()] == [("delete", {"text": "milk"})]
    assert claude.requests == []
    last = gpt.requests[-1]["messages"]
    [call] = [m for m in last if m.get("tool_calls")][-1]["tool_calls"]
    results = [m for m in last if m["role"] == "tool"]
    assert results[-1]["tool_call_id"] == call["id"]
    assert any("Deleted the milk note." in post["text"] for post in slack.posts)
