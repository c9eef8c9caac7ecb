"""Approvals on Slack (SPEC §14), end to end: the notes server's destructive `delete`, the card as
Block Kit with two buttons, presses as `block_actions` over Socket Mode and over signed HTTP, and
the waiting sign (a reaction on the asking message) while the card waits."""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp

from bot import replies
from bot.cli.compose import App
from channels.slack.approvals import APPROVE_ACTION, DENY_ACTION, WAITING_REACTION
from channels.slack.channel import EVENTS_PATH
from tests.channels.slack.conftest import ALICE, BOB, GENERAL, SIGNING_SECRET
from tests.channels.slack.test_scenarios import send, slack_channel
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, rule_toml, server_toml
from tests.waiting import until

EVE = "U0EVE0001"
TOML = (
    server_toml()
    + rule_toml(GENERAL, ["notes__*"])
    + f'\n[approvals]\napprovers = ["slack:{BOB}", "slack:{ALICE}"]\n'
)
HOSTILE = "milk <!channel> <@U0BOB0001>"
DELETE = ToolCall("notes__delete", {"text": HOSTILE})


def card_of(slack: FakeSlack) -> dict[str, Any]:
    [card] = [post for post in slack.posts if post["blocks"]]
    return card


def buttons(post: dict[str, Any]) -> dict[str, str]:
    return {
        element["action_id"]: element["value"]
        for block in post["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }


def last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(block.get("text", "")) for block in content)


async def test_socket_mode_presses_refuse_others_and_the_approver_runs_it_once(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    slack.add_user(EVE, "eve", real_name="Eve Ng")
    claude.script(Reply(tool_calls=[DELETE]), "It waits for approval.", "Deleted.")
    async with App(make_mcp_config(TOML)) as app:
        mention = slack.mention(GENERAL, ALICE, "delete the milk note")
        asked = mention["event"]["ts"]
        await send(slack, app, mention)
        card = card_of(slack)
        shown = json.dumps(card["blocks"])  # before the update replaces them
        waiting = [r for r in slack.reactions if r[3] == WAITING_REACTION]
        ids = buttons(card)
        assert ids[APPROVE_ACTION] == ids[DENY_ACTION]  # the value is the approval id only
        for who, action, value in (
            (ALICE, APPROVE_ACTION, ids[APPROVE_ACTION]),
            (EVE, APPROVE_ACTION, ids[APPROVE_ACTION]),
            (BOB, APPROVE_ACTION, "forged-value-0123456789"),
        ):
            await slack.acked(
                await slack.push_interactive(slack.block_action(card, who, action, value))
            )
        await until(lambda: len(slack.ephemeral) == 3)
        assert "delete" not in call_log.tools()
        envelope = await slack.push_interactive(
            slack.block_action(card, BOB, APPROVE_ACTION, ids[APPROVE_ACTION])
        )
        await slack.acked(envelope)
        await until(lambda: len(claude.requests) >= 3)
        await slack_channel(app).drain()
        await app.host.idle()
        await until(lambda: ("remove", GENERAL, asked, WAITING_REACTION) in slack.reactions)
        await slack.acked(
            await slack.push_interactive(
                slack.block_action(card, BOB, DENY_ACTION, ids[DENY_ACTION])
            )
        )
        await until(lambda: len(slack.ephemeral) == 4)
    assert [e["text"] for e in slack.ephemeral] == [
        replies.APPROVAL_OWN_REQUEST,
        replies.APPROVAL_NOT_YOURS,
        replies.APPROVAL_UNKNOWN,
        replies.approval_already("approved"),
    ]
    assert [e["user"] for e in slack.ephemeral] == [ALICE, EVE, BOB, BOB]
    assert [(c["tool"], c["arguments"]) for c in call_log.calls()] == [
        ("delete", {"text": HOSTILE})
    ]
    # The card showed the arguments that ran, escaped: no ping, no mention.
    assert "&lt;!channel&gt;" in shown
    assert "<!channel>" not in shown
    closed = next(post for post in slack.posts if post["ts"] == card["ts"])
    assert not buttons(closed)
    assert f"approved by slack:{BOB}" in closed["text"]
    # The asking message showed that the conversation waits, until the card was decided.
    assert waiting == [("add", GENERAL, asked, WAITING_REACTION)]
    assert "approved" in last_user_text(claude.requests[2])
    assert any(post["text"] == "Deleted." for post in slack.posts)


async def test_http_mode_takes_signed_presses_and_refuses_forged_ones(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    claude.script(Reply(tool_calls=[DELETE]), "It waits.", "Not deleted: denied.")
    config = make_mcp_config('mode = "http"\n' + TOML, BOT_HTTP__ENABLED="true", BOT_HTTP__PORT="0")
    async with App(config) as app, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{app.http_port}{EVENTS_PATH}"
        body = slack.mention(GENERAL, ALICE, "delete the milk note")
        raw, headers = slack.signed(body, SIGNING_SECRET)
        async with session.post(url, data=raw, headers=headers) as response:
            assert response.status == 200
        await until(lambda: any(post["blocks"] for post in slack.posts))
        await app.host.idle()
        card = card_of(slack)
        deny = buttons(card)[DENY_ACTION]
        payload = {"payload": json.dumps(slack.block_action(card, BOB, DENY_ACTION, deny))}
        statuses = []
        for secret in ("not-the-secret", SIGNING_SECRET):
            raw, headers = slack.signed_form(payload, secret, timestamp=int(time.time()))
            async with session.post(url, data=raw, headers=headers) as response:
                statuses.append(response.status)
        await until(lambda: len(claude.requests) >= 3)
        await app.host.idle()
    assert statuses == [401, 200]
    assert "delete" not in call_log.tools()
    assert "denied by an approver" in last_user_text(claude.requests[2])
