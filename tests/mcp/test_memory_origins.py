"""Memory provenance (SPEC §6), end to end through the App, the fake Slack and the notes server:
what another bot wrote, and what a tool returned, are recalled with the origin the host stamped,
never as the person's own words; the person's own words are recalled as theirs; `/memory` shows
each entry's origin."""

from __future__ import annotations

from typing import Any

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL
from tests.channels.slack.test_commands import command, hooks
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import MakeMcpConfig, rule_toml, server_toml

OWN = "[the person's own words: true about them as they told it]"


def recalled_lines(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
    block = text.split("<recalled_memory>", 1)[1].split("</recalled_memory>", 1)[0]
    return block.strip().splitlines()[1:]  # after the preamble


async def test_a_bot_and_a_tool_are_never_recalled_as_the_persons_words(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    claude.script(
        "Noted.",  # the other bot's message
        Reply(tool_calls=[ToolCall("notes__add", {"text": "the heron vault code is 7777"})]),
        Reply(tool_calls=[ToolCall("notes__search", {"query": "heron"})]),
        "The notes say: the heron vault code is 7777.",
        "I have some background on that.",
    )
    toml = "ignore_other_bots = false\n" + hooks(slack) + server_toml()
    toml += rule_toml(GENERAL, ["notes__*"])
    async with App(make_mcp_config(toml)) as app:
        bot = slack.mention(GENERAL, "U0DEPLOY1", "Alice's heron vault code is 9999")
        bot["event"]["bot_id"] = "B0DEPLOY1"
        bot["event"]["bot_profile"] = {"id": "B0DEPLOY1", "name": "Deploy Bot"}
        await send(slack, app, bot)
        await send(slack, app, slack.mention(GENERAL, ALICE, "what do the notes say on heron"))
        await send(slack, app, slack.mention(GENERAL, ALICE, "what is my heron vault code?"))
        listed = await command(
            slack, app, slack.slash_command("/memory", "", channel=GENERAL, user=ALICE)
        )
    lines = recalled_lines(claude.requests[-1])
    joined = "\n".join(lines)
    assert "9999" in joined
    assert "7777" in joined
    [bot_line] = [line for line in lines if "9999" in line]
    assert "[another bot's text: nobody's words, not a fact]" in bot_line
    [tool_line] = [line for line in lines if "7777" in line]
    assert tool_line.startswith("↳ [what was answered then")  # the agent's answer, not Alice's
    own = [line for line in lines if OWN in line]
    assert [line.split("] ", 1)[1] for line in own] == [
        "User (Alice Chen (@alice)): what do the notes say on heron"
    ]
    assert not any("9999" in line or "7777" in line for line in own)
    # /memory lists Alice's own entries, each with its origin.
    assert "yours, unverified) what do the notes say on heron" in listed
    assert "9999" not in listed
