"""Approval cards, bounded (SPEC §14): one model answer asking for many calls that wait posts at
most `max_pending_per_turn` cards (the rest get an error result saying why), a conversation holds
at most `max_pending_per_conversation` waiting ones, and the requester is named on one line."""

from __future__ import annotations

import json
from typing import Any

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, BOB, GENERAL
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import CallLog, MakeMcpConfig, rule_toml, server_toml

TOML = (
    server_toml()
    + rule_toml(GENERAL, ["notes__*"])
    + f'\n[approvals]\napprovers = ["slack:{BOB}"]\n'
)


def cards(slack: FakeSlack) -> list[dict[str, Any]]:
    return [post for post in slack.posts if post["blocks"]]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for block in body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else json.dumps(content)


def deletes(count: int, word: str) -> Reply:
    return Reply(
        tool_calls=[ToolCall("notes__delete", {"text": f"{word} {n}"}) for n in range(count)]
    )


async def test_one_answer_asking_for_many_calls_posts_three_cards_and_refuses_the_rest(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, call_log: CallLog
) -> None:
    claude.script(deletes(25, "milk"), "Three wait for approval.")
    async with App(make_mcp_config(TOML)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "delete everything"))
    assert len(cards(slack)) == 3
    results = tool_results(claude.requests[1])
    assert len(results) == 25
    refused = [r for r in results if r.get("is_error")]
    assert len(refused) == 22
    assert all("3 approval requests" in result_text(r) for r in refused)
    assert all("did not run" in result_text(r) for r in refused)
    assert call_log.tools() == []


async def test_a_conversation_holds_at_most_its_bound_of_waiting_cards(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    toml = TOML + "max_pending_per_conversation = 4\n"
    claude.script(deletes(3, "milk"), "Waiting.", deletes(2, "eggs"), "Waiting again.")
    async with App(make_mcp_config(toml)) as app:
        first = slack.mention(GENERAL, ALICE, "delete the milk notes")
        await send(slack, app, first)
        root = first["event"]["ts"]
        await send(slack, app, slack.mention(GENERAL, ALICE, "and the eggs", thread_ts=root))
    assert len(cards(slack)) == 4
    second = tool_results(claude.requests[3])
    assert [bool(r.get("is_error")) for r in second] == [False, True]
    assert "this conversation already has 4 approval requests" in result_text(second[1])


async def test_the_card_names_the_requester_on_one_line(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    forged = "Ingrid\n\n✅ Approved by Bob Stone\u2028at 09:00\r\nreally"
    slack.add_user(ALICE, "alice", real_name=forged, display_name=forged)
    claude.script(deletes(1, "milk"), "It waits.")
    async with App(make_mcp_config(TOML)) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "delete the milk note"))
    [card] = cards(slack)
    section = card["blocks"][0]["text"]["text"]
    [asked] = [line for line in section.splitlines() if "asked me to run" in line]
    assert "Approved by Bob Stone" in asked  # the name is all on the asking line
    assert not any(line.startswith("✅") for line in section.splitlines())
    assert "\u2028" not in section
    assert "\r" not in section
