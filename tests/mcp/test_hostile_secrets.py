"""No configured secret reaches the model, its history or a record through a tool (SPEC §14,
audit defects 2 and 4): the whole App with the Slack fake, the model scripted by the Anthropic
fake, and a hostile server (tests/mcp_servers/hostile.py `leaky`) handed secrets through `env`
that returns them every way it can: in a result, in an error result, in a JSON-RPC error, in
the error output of a start that fails. Every recorded request and every byte the store wrote
are searched for every secret's value."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli.compose import App
from tests.channels.slack.conftest import ALICE, GENERAL, SIGNING_SECRET
from tests.channels.slack.test_scenarios import send
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import MakeMcpConfig, hostile_toml, rule_toml
from tests.mcp.test_slack_tools import tool_results
from tests.waiting import until

TOKEN = "hostile-token-7781-zyxwvu"  # no credential shape: found only by its value
API_KEY = "sk-ant-test-key-0123456789"  # the Slack test config's model key
ENV = ("HOSTILE_TOKEN", "HOSTILE_MARKER", "ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN")
RULE = rule_toml(GENERAL, ["hostile__*"])


def calls(*tools: str) -> Reply:
    return Reply(tool_calls=[ToolCall(f"hostile__{tool}", {}) for tool in tools])


def stored(agent_dir: Path) -> str:
    """Every byte the store wrote (the database and its journal), as text."""
    return "".join(
        path.read_bytes().decode("utf-8", errors="replace")
        for path in (agent_dir / "data").iterdir()
    )


async def test_a_server_handing_back_its_secrets_reaches_neither_the_model_nor_the_store(
    slack: FakeSlack,
    claude: FakeAnthropic,
    make_mcp_config: MakeMcpConfig,
    agent_dir: Path,
    tmp_path: Path,
) -> None:
    claude.script(
        calls("echo", "dump", "fail", "refuse"),
        "Four answers.",
        calls("crash"),
        "It crashed.",
        calls("echo"),
        "It is down.",
    )
    toml = hostile_toml("hostile", "leaky", env=ENV, timeout=1) + RULE
    config = make_mcp_config(toml, HOSTILE_TOKEN=TOKEN, HOSTILE_MARKER=str(tmp_path / "crashed"))
    secrets = [TOKEN, API_KEY, slack.bot_token, slack.app_token, SIGNING_SECRET]
    async with App(config) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "show me what you know"))
        await send(slack, app, slack.mention(GENERAL, ALICE, "crash it"))
        [link] = app.mcp.links if app.mcp else []
        # The server is down now, and why says what its failed start wrote (the token in it).
        await until(lambda: "stderr" in (link.problem or ""), state=lambda: link.problem)
        await send(slack, app, slack.mention(GENERAL, ALICE, "try again"))
    sent = json.dumps(claude.requests, ensure_ascii=False)
    for secret in secrets:
        assert secret not in sent
    for secret in secrets:
        assert secret not in stored(agent_dir)
    # The results are still there, each secret in them replaced by a mark.
    echoed, dumped, failed, refused = tool_results(claude.requests[1])
    assert "my token is [redacted], keep it safe" in echoed["content"]
    assert "[redacted]" in dumped["content"]
    assert failed["is_error"]
    assert "login refused for token=[redacted]" in failed["content"]
    assert refused["is_error"]
    assert "bad credentials [redacted]" in refused["content"]
    [down] = tool_results(claude.requests[5])
    assert down["is_error"]
    assert "cannot log in with [redacted]" in down["content"]


async def test_a_secret_pasted_into_a_message_reaches_neither_the_model_nor_the_store(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig, agent_dir: Path
) -> None:
    """Not only tools: the person's own text is redacted by value too (the signing secret has
    no credential shape; only its value finds it), before it is stored (the inbox, history,
    memory) or read into a prompt."""
    claude.script("I will not repeat it.")
    async with App(make_mcp_config("")) as app:
        pasted = f"here is our signing secret {SIGNING_SECRET} and the key {API_KEY}"
        mention = slack.mention(GENERAL, ALICE, pasted)
        await send(slack, app, mention)
        key = f"slack:T0FAKE:{GENERAL}:{mention['event']['ts']}"
        history = json.dumps([repr(entry) for entry in await app.store.history.load(key)])
        memory = json.dumps([repr(hit) for hit in await app.store.memory.search("signing")])
    sent = json.dumps(claude.requests, ensure_ascii=False)
    assert "here is our signing secret [redacted] and the key [redacted]" in sent
    assert "[redacted]" in history
    for secret in (SIGNING_SECRET, API_KEY):
        assert secret not in sent
        assert secret not in history
        assert secret not in memory
        assert secret not in stored(agent_dir)
