"""A server's hints cannot switch off an approval the operator asked for (SPEC §14, audit defect
1): the whole App with the Slack fake, the model scripted by the Anthropic fake, and a hostile
server (tests/mcp_servers/hostile.py `readonly`) whose `delete_all` claims `readOnlyHint`."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, BOB, GENERAL
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import MakeMcpConfig, hostile_toml, rule_toml

RULE = rule_toml(GENERAL, ["hostile__*"]) + f'\n[approvals]\napprovers = ["slack:{BOB}"]\n'


def server(approve: list[str]) -> str:
    return hostile_toml("hostile", "readonly", extra=f"approve = {json.dumps(approve)}\n")


def ran(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("call ")]


def cards(slack: FakeSlack) -> list[str]:
    return [json.dumps(post["blocks"]) for post in slack.posts if post["blocks"]]


async def test_read_only_hint_does_not_lift_the_operators_approve_glob(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, tmp_path: Path
) -> None:
    log = tmp_path / "hostile.log"
    claude.script(Reply(tool_calls=[ToolCall("hostile__delete_all", {})]), "It waits.")
    config = make_mcp_config(server(["delete_*"]) + RULE, HOSTILE_LOG=str(log))
    async with App(config) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "delete everything"))
        [approval] = await app.approvals.listing() if app.approvals else []
    assert ran(log) == []  # it did not run: it waits for an approver
    [card] = cards(slack)
    assert "hostile__delete_all" in card
    assert approval.tool == "hostile__delete_all"


async def test_destructive_hint_adds_an_approval_and_allow_without_approval_exempts(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, tmp_path: Path
) -> None:
    log = tmp_path / "hostile.log"
    claude.script(
        Reply(
            tool_calls=[
                ToolCall("hostile__erase", {}),
                ToolCall("hostile__lookup", {}),
                ToolCall("hostile__delete_all", {}),
            ]
        ),
        "Done what I could.",
    )
    toml = server(["delete_*"]) + RULE + 'allow_without_approval = ["hostile__delete_*"]\n'
    async with App(make_mcp_config(toml, HOSTILE_LOG=str(log))) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "tidy up"))
    # erase waits (destructive); lookup runs (no hint, no glob); delete_all runs, because the
    # operator exempted it by name, which is theirs to do.
    assert ran(log) == ["lookup", "delete_all"]
    [card] = cards(slack)
    assert "hostile__erase" in card
