"""Per-surface policy end to end through slack-bolt and the fakes: two channels with different
instructions and models, one shared agent-wide prompt prefix, and `bot usage --by surface`
agreeing with the turn records."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
import structlog

from bot.cli import main
from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, BOB, DM, GENERAL, MakeConfig
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack

SUPPORT = "C0SUPPORT"
RULES = f"""
[[surfaces]]
platform = "slack"
id = "{GENERAL}"
instructions = "In #general, answer in one short paragraph."
model = "claude-opus-4-1"

[[surfaces]]
platform = "slack"
id = "{SUPPORT}"
instructions = "In #support, always end with a link to the runbook."
model = "claude-haiku-4-5"
max_tokens = 700
skills = ["summarize"]

[[surfaces]]
platform = "slack"
kind = "dm"
instructions = "This is a private chat."
"""


def session_block(body: dict[str, Any]) -> str:
    return str(body["system"][-1]["text"])


async def test_two_channels_get_their_own_instructions_and_models(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_config: MakeConfig,
    capsys: pytest.CaptureFixture[str],
) -> None:
    slack.add_channel(SUPPORT, "support")
    config = make_config(RULES)
    async with App(config) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "status?"))
        await send(slack, app, slack.mention(SUPPORT, BOB, "the VPN is down"))
        await send(slack, app, slack.mention(SUPPORT, ALICE, "and the wiki too"))
        await send(slack, app, slack.dm(DM, ALICE, "hello"))
        records = [
            await app.store.records.show(s.turn_id) for s in await app.store.records.recent()
        ]
    general, support, _, direct = claude.requests
    assert (general["model"], general["max_tokens"]) == ("claude-opus-4-1", 4096)
    assert (support["model"], support["max_tokens"]) == ("claude-haiku-4-5", 700)
    assert "answer in one short paragraph" in session_block(general)
    assert "runbook" in session_block(support)
    assert "runbook" not in session_block(general)
    assert "List decisions, then open questions" in session_block(support)
    assert "This is a private chat." in session_block(direct)
    # The agent-wide part (everything before the session block) is the same bytes everywhere.
    assert general["system"][:-1] == support["system"][:-1] == direct["system"][:-1]
    assert not any("runbook" in block["text"] for block in support["system"][:-1])
    rules = {r["details"]["surface"]: r["details"].get("surface_rule") for r in records if r}
    assert rules[f"slack:{SUPPORT}"] == f"surfaces[1] (platform slack, id {SUPPORT})"

    by_record: Counter[str] = Counter()
    for record in records:
        assert record is not None
        for kind, value in record["usage"].items():
            if kind != "cache_write_1h_tokens":
                by_record[f"{record['details']['surface']} {kind}"] += value
    capsys.readouterr()  # the app's log lines
    structlog.reset_defaults()
    try:
        code = await asyncio.to_thread(
            main, ["--config", str(config.source), "usage", "--by", "surface", "--json"]
        )
    finally:
        structlog.reset_defaults()
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    by_usage: Counter[str] = Counter()
    for line in report[:-1]:
        for kind in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
            by_usage[f"{line['key']} {kind}"] += line[kind]
    assert +by_usage == +by_record
    surfaces = sorted([f"slack:{DM}", f"slack:{GENERAL}", f"slack:{SUPPORT}"])
    assert [line["key"] for line in report] == [*surfaces, "total"]
    assert report[-1]["turns"] == 4
    assert report[-1]["cost_usd"] > 0
