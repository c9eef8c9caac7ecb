"""What one server's tool list can do to the host (SPEC §11 bounded everything, §14 isolation;
audit defects 3, 6 and 7), with hostile servers speaking the raw protocol
(tests/mcp_servers/hostile.py): 10,000 tools or a 5 MB schema refuse that server, not the host,
at start or when it grows; a flood of list-changed notices is re-listed at a bounded rate; two
servers' tools that would reach the model under one name are both left out, saying why."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mcp.types import Tool

from bot.cli import main
from bot.cli.compose import App
from bot.config import LoggingSettings
from bot.logs import configure_logging
from bot.mcp.connection import RELIST_SECONDS, tool_info
from bot.mcp.hub import McpHub, distinct
from bot.mcp.settings import SERVER_NAME, McpServerSettings, McpSettings
from tests.channels.slack.conftest import ALICE, GENERAL
from tests.channels.slack.test_scenarios import send
from tests.conftest import write_config
from tests.fakes.anthropic import FakeAnthropic, Reply, ToolCall
from tests.fakes.slack import FakeSlack
from tests.mcp.conftest import MakeMcpConfig, hostile_toml, rule_toml
from tests.mcp.test_slack_tools import tool_names
from tests.waiting import until
from tests.warmbot import HOSTILE_COMMAND

RULE = rule_toml(GENERAL, ["huge__*", "small__*", "grower__*"])


def refusals(logs: str) -> list[dict[str, str]]:
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    return [line for line in lines if line["event"] == "mcp_server_refused"]


async def test_a_server_listing_10000_tools_is_refused_and_the_host_serves_without_it(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    stream = io.StringIO()
    toml = hostile_toml("huge", "tools", "10000") + hostile_toml("small", "names", "a") + RULE
    config = make_mcp_config(toml)
    configure_logging(LoggingSettings(format="json"), config.secrets, stream)
    claude.script("Still here.")
    async with App(config) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "are you there?"))
    assert [post["text"] for post in slack.posts] == ["Still here."]
    assert [n for n in tool_names(claude.requests[0]) if "__" in n] == ["small__a"]
    [refused] = refusals(stream.getvalue())  # one line, naming the server, the bound, the fix
    assert refused["server"] == "huge"
    assert "max_tools = 128" in refused["error"]
    assert "Fix:" in refused["error"]


async def test_a_server_that_grows_past_its_bound_at_run_time_is_refused(
    slack: FakeSlack, claude: FakeAnthropic, make_mcp_config: MakeMcpConfig
) -> None:
    claude.script(Reply(tool_calls=[ToolCall("grower__grow", {})]), "Grown.", "Next.")
    config = make_mcp_config(hostile_toml("grower", "grow", "10001") + RULE)
    async with App(config) as app:
        await send(slack, app, slack.mention(GENERAL, ALICE, "grow"))
        [link] = app.mcp.links if app.mcp else []
        # Refused (its problem says so), or, unbounded, listed whole.
        await until(lambda: link.problem or len(link.tools) > 2, state=lambda: len(link.tools))
        await send(slack, app, slack.mention(GENERAL, ALICE, "and now?"))
    assert "grower__grow" in tool_names(claude.requests[0])
    assert not [name for name in tool_names(claude.requests[2]) if name.startswith("grower__")]
    assert "max_tools" in (link.problem or "")


def hub_of(*servers: tuple[str, list[str]], log: Path | None = None) -> McpHub:
    settings = McpSettings(
        servers=[
            McpServerSettings(name=name, command=[*HOSTILE_COMMAND, *mode], env=["HOSTILE_LOG"])
            for name, mode in servers
        ]
    )
    return McpHub(settings, {"HOSTILE_LOG": str(log)} if log else {})


async def test_one_5_mb_schema_refuses_its_server_only() -> None:
    hub = hub_of(("huge", ["tools", "2", str(5 * 1024 * 1024)]), ("small", ["names", "a"]))
    await hub.start()
    try:
        huge, small = hub.links
        assert huge.refused
        assert "max_schema_bytes = 65536" in (huge.problem or "")
        assert [tool.spec.name for tool in hub.tools()] == ["small__a"]
        assert small.problem is None
    finally:
        await hub.aclose()


async def test_a_flood_of_list_changed_notices_is_re_listed_at_a_bounded_rate(
    tmp_path: Path,
) -> None:
    """The server says its tools changed 1,000 times at once, then again after every listing
    it answers: re-listing on every notice would never end. However slow or fast the machine,
    at most one listing per RELIST_SECONDS follows the first."""
    log = tmp_path / "hostile.log"
    began = time.monotonic()
    hub = hub_of(("flood", ["flood", "1000"]), log=log)
    await hub.start()
    try:
        [ping] = hub.tools()
        for _ in range(20):  # calls still get through while it floods
            await ping({})
        await until(lambda: log.read_text().count("notice") >= 1000)
    finally:
        await hub.aclose()
    elapsed = time.monotonic() - began
    lists = log.read_text().splitlines().count("list")
    assert lists >= 1
    assert lists <= 2 + elapsed / RELIST_SECONDS


async def test_two_servers_tools_under_one_name_are_both_left_out_saying_why() -> None:
    hub = hub_of(("dup_", ["names", "x", "y"]), ("dup", ["names", "_x", "z"]))
    await hub.start()
    try:
        names = [tool.spec.name for tool in hub.tools()]
    finally:
        await hub.aclose()
    assert len(names) == len(set(names))
    assert names == ["dup___y", "dup__z"]
    clashes = hub.clashes
    assert list(clashes) == ["dup___x"]
    assert "'dup_''s 'x'" in clashes["dup___x"]
    assert "'dup''s '_x'" in clashes["dup___x"]
    assert "Fix:" in clashes["dup___x"]


def test_doctor_says_which_server_is_refused_and_why(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(agent_dir, hostile_toml("huge", "tools", "500", env=()))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    main(["doctor", "--config", str(agent_dir / "bot.toml")])
    [line] = [line for line in capsys.readouterr().out.splitlines() if "mcp server huge" in line]
    assert line.startswith("FAIL")
    assert "max_tools = 128" in line
    assert "Fix: raise max_tools" in line


SERVERS = st.from_regex(SERVER_NAME, fullmatch=True).filter(lambda name: "__" not in name)
TOOLS = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)


@given(st.dictionaries(SERVERS, st.sets(TOOLS, max_size=4), max_size=4))
@example({"dup_": {"x"}, "dup": {"_x"}})
def test_a_name_the_model_sees_is_one_tool_of_one_server_or_none(
    servers: dict[str, set[str]],
) -> None:
    infos = [
        info
        for server, tools in servers.items()
        for tool in tools
        if (info := tool_info(server, Tool(name=tool, input_schema={"type": "object"})))
    ]
    kept, clashes = distinct(infos)
    names = [info.name for info in kept]
    assert len(names) == len(set(names))
    assert not set(names) & set(clashes)
    # Nothing is lost but the clashes: every name that only one tool has is offered.
    assert {info.name for info in infos} == set(names) | set(clashes)
    for info in kept:  # and it is the tool of the one server that listed it
        assert servers[info.server] >= {info.tool}
