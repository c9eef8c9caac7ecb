"""Continuity accounts keep every tool call that ran (SPEC §5): the whole App with the Slack fake,
a real MCP server over stdio, and the model behind the Anthropic fake, which fails after the
call. The next turn's request must show the call, so the model does not run it again."""

from __future__ import annotations

import json
from typing import Any

from bot.cli.compose import App
from channels.slack.approvals import APPROVE_ACTION
from tests.channels.slack.conftest import ALICE, BOB, GENERAL
from tests.channels.slack.test_scenarios import send, slack_channel
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import TEAM, FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, rule_toml, server_toml
from tests.waiting import until

ALLOWED = rule_toml(GENERAL, ["notes__*"])
PROVIDER_TEXT = "upstream exploded at rack 7 (injected); Fix: page the on-call"


def _then_fail(claude: FakeAnthropic, status: int, *calls: ToolCall) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        claude.fail(status, body=PROVIDER_TEXT)  # the request after the calls
        return Reply(text="On it.", tool_calls=list(calls))

    return reply


def _assistant_texts(body: dict[str, Any]) -> str:
    return "\n".join(
        block["text"]
        for message in body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "text"
    )


async def test_a_call_that_ran_before_the_model_failed_is_in_the_account_and_the_next_request(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    claude.script(_then_fail(claude, 529, ToolCall("notes__add", {"text": "ticket: printer"})))
    async with App(make_mcp_config(server_toml() + ALLOWED)) as app:
        first = slack.mention(GENERAL, ALICE, "open a ticket for the printer")
        await send(slack, app, first)
        [key] = await app.store.history.conversations()
        account = await app.store.history.load(key)
        again = slack.mention(GENERAL, ALICE, "did it work?", thread_ts=first["event"]["ts"])
        await send(slack, app, again)
    assert call_log.tools() == ["add"]  # ran once, in the first turn
    note = account[-1].text
    assert "did not complete" in note
    assert 'notes__add {"text": "ticket: printer"}' in note
    assert "added note 1" in note  # its outcome
    # No provider error text and no operator hint in history: they stay in the record and log.
    assert "rack 7" not in note
    assert "Fix:" not in note
    sent = _assistant_texts(claude.requests[-1])
    assert 'notes__add {"text": "ticket: printer"}' in sent
    assert "added note 1" in sent
    assert "rack 7" not in json.dumps(claude.requests[-1])


async def test_a_call_that_ran_before_a_500_is_kept_with_a_failed_one_beside_it(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    calls = (ToolCall("notes__add", {"text": "x" * 9000}), ToolCall("notes__nothing_here", {}))
    claude.script(_then_fail(claude, 500, *calls))
    async with App(make_mcp_config(server_toml() + ALLOWED)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "add a long one"))
        [key] = await app.store.history.conversations()
        account = await app.store.history.load(key)
    note = account[-1].text
    assert "1. notes__add" in note
    assert "2. notes__nothing_here" in note
    assert "-> failed: unknown tool" in note
    assert len(note.encode()) + len(account[0].text.encode()) <= 48 * 1024


async def test_a_turn_a_person_stops_after_a_call_keeps_the_call(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    def then_hang(body: dict[str, Any]) -> Reply:
        claude.hang_midstream("Let me check the")
        return Reply(tool_calls=[ToolCall("notes__add", {"text": "stop me"})])

    claude.script(then_hang)
    async with App(make_mcp_config(server_toml() + ALLOWED)) as app:
        first = slack.mention(GENERAL, ALICE, "add and wait")
        key = f"slack:{TEAM}:{GENERAL}:{first['event']['ts']}"
        await slack.acked(await slack.push(first))
        await until(lambda: len(claude.requests) == 2 and call_log.tools() == ["add"])
        assert await app.host.cancel(key)
        await app.host.idle()
        account = await app.store.history.load(key)
    note = account[-1].text
    assert "the person stopped it" in note
    assert 'notes__add {"text": "stop me"}' in note
    assert "added note 1" in note


async def test_an_approved_call_whose_continuation_fails_stays_in_the_account(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    toml = server_toml() + ALLOWED + f'\n[approvals]\napprovers = ["slack:{BOB}"]\n'

    def then_fail(body: dict[str, Any]) -> Reply:
        claude.fail(529, body=PROVIDER_TEXT)  # the continuation's model call
        return Reply(text="It waits for approval.")

    claude.script(Reply(tool_calls=[ToolCall("notes__delete", {"text": "milk"})]), then_fail)
    async with App(make_mcp_config(toml)) as app:
        first = slack.mention(GENERAL, ALICE, "delete the milk note")
        key = f"slack:{TEAM}:{GENERAL}:{first['event']['ts']}"
        await send(slack, app, first)
        [card] = [post for post in slack.posts if post["blocks"]]
        value = next(
            element["value"]
            for block in card["blocks"]
            if block["type"] == "actions"
            for element in block["elements"]
            if element["action_id"] == APPROVE_ACTION
        )
        press = slack.block_action(card, BOB, APPROVE_ACTION, value)
        await slack.acked(await slack.push_interactive(press))
        await until(lambda: len(claude.requests) == 3)
        await slack_channel(app).drain()
        await app.host.idle()
        history = await app.store.history.load(key)
        again = slack.mention(GENERAL, ALICE, "is it gone?", thread_ts=first["event"]["ts"])
        await send(slack, app, again)
    assert call_log.tools() == ["delete"]
    request, note = history[-2:]
    assert "did not complete" in note.text
    assert "rack 7" not in note.text
    assert "notes__delete" in request.text
    assert "approved" in request.text
    sent = json.dumps(claude.requests[-1]["messages"])
    assert "notes__delete" in sent
    assert "did not complete" in sent
