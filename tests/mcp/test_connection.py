"""One server link on its own: calls, the error results of each way a server fails, cancellation,
the tool model (names, hints, canonical schemas) and the settings' checks."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.types import Tool, ToolAnnotations

from bot.cli.settings import load_config
from bot.errors import ConfigError, ToolCallFailed, ToolError
from bot.mcp.connection import ServerConnection, tool_info
from bot.mcp.hub import McpHub
from bot.mcp.settings import McpServerSettings, McpSettings
from tests.conftest import write_config
from tests.mcp.conftest import NOTES, CallLog
from tests.waiting import until


def notes(timeout: float = 10, **extra: object) -> McpServerSettings:
    return McpServerSettings(
        name="notes",
        command=NOTES,
        env=["NOTES_CALLS"],
        timeout_seconds=timeout,
        max_output_bytes=2048,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
async def hub(call_log: CallLog) -> AsyncIterator[McpHub]:
    hub = McpHub(McpSettings(servers=[notes(timeout=30)]), {"NOTES_CALLS": str(call_log.path)})
    await hub.start()
    yield hub
    await hub.aclose()


async def test_tools_are_named_for_their_server_sorted_with_their_hints(hub: McpHub) -> None:
    names = [t.spec.name for t in hub.tools()]
    assert names == sorted(names)
    assert "notes__add" in names
    [add] = [t for t in hub.tools() if t.spec.name == "notes__add"]
    [search] = [t for t in hub.tools() if t.spec.name == "notes__search"]
    assert (add.info.destructive, add.info.read_only) == (False, False)
    assert search.info.read_only is True
    assert add.info.tool == "add"
    assert add.info.server == "notes"


async def test_a_tool_error_and_an_unknown_tool_are_error_results(hub: McpHub) -> None:
    [boom] = [t for t in hub.tools() if t.spec.name == "notes__boom"]
    with pytest.raises(ToolError) as raised:
        await boom({})
    assert "reported an error" in str(raised.value)
    assert "notes__boom" in str(raised.value)
    link = hub.links[0]
    result = await link.call("no_such_tool", {})
    assert result.is_error
    with pytest.raises(ToolCallFailed, match="refused the call: refused by the shelf's policy"):
        await link.call("refuse", {})


async def test_a_cancelled_call_ends_at_once_and_the_next_call_works(
    hub: McpHub, call_log: CallLog
) -> None:
    link = hub.links[0]
    slow = asyncio.create_task(link.call("sleep", {"seconds": 60}))
    await until(lambda: "sleep" in call_log.tools())
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    result = await link.call("search", {"query": "x"})
    assert not result.is_error


async def test_a_server_that_cannot_start_costs_each_call_an_error_result() -> None:
    settings = McpServerSettings(name="gone", command=["/nonexistent/server"], timeout_seconds=0.5)
    link = ServerConnection(settings, {})
    await link.start()
    try:
        assert link.problem is not None
        assert "cannot start" in link.problem
        with pytest.raises(ToolCallFailed, match="not available"):
            await link.call("anything", {})
    finally:
        await link.aclose()


async def test_closing_stops_the_child_process(call_log: CallLog) -> None:
    link = ServerConnection(notes(), {"NOTES_CALLS": str(call_log.path)})
    await link.start()
    await link.call("search", {"query": "x"})
    [call] = call_log.calls()
    await link.aclose()

    def gone() -> bool:
        try:
            os.kill(call["pid"], 0)
        except ProcessLookupError:
            return True
        return False

    await until(gone)


def test_a_tool_whose_name_the_model_api_refuses_is_not_offered() -> None:
    schema = {"type": "object", "properties": {"b": {}, "a": {}}}
    assert tool_info("s", Tool(name="has space", input_schema=schema)) is None
    info = tool_info(
        "s", Tool(name="ok", input_schema=schema, annotations=ToolAnnotations(read_only_hint=True))
    )
    assert info is not None
    assert info.name == "s__ok"
    assert info.read_only is True
    assert json.dumps(info.input_schema) == '{"properties": {"a": {}, "b": {}}, "type": "object"}'


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('name = "n"\n', "set exactly one of command"),
        ('name = "n"\ncommand = ["x"]\nurl = "http://h/mcp"\n', "set exactly one of command"),
        ('name = "Bad"\ncommand = ["x"]\n', r"mcp.servers\[0\].name = 'Bad'"),
        ('name = "a__b"\ncommand = ["x"]\n', "may not hold '__'"),
        ('name = "n"\nurl = "ftp://h"\n', r"mcp.servers\[0\].url"),
        ('name = "n"\nurl = "http://h/mcp"\nenv = ["T"]\n', "send credentials to it with headers"),
        (
            'name = "n"\ncommand = ["x"]\nheaders_env = { A = "T" }\n',
            "pass its credentials with env",
        ),
        ('name = "n"\ncommand = ["x"]\nenv = ["not a name"]\n', r"mcp.servers\[0\].env\[0\]"),
        ('name = "n"\ncommand = ["x"]\ntimeout_seconds = 0\n', "timeout_seconds"),
        ('name = "n"\ncommand = ["x"]\nmax_output_bytes = 10\n', "max_output_bytes"),
        ('name = "n"\ncommand = ["x"]\ntoken = "abc"\n', "secrets are never read from the config"),
        ('name = "n"\ncommand = ["x"]\n[[mcp.servers]]\nname = "n"\ncommand = ["y"]\n', "own name"),
    ],
)
def test_bad_server_entries_are_config_errors_naming_the_key(
    agent_dir: Path, toml: str, message: str
) -> None:
    write_config(agent_dir, "\n[[mcp.servers]]\n" + toml)
    with pytest.raises(ConfigError, match=message):
        load_config(agent_dir / "bot.toml", env={})


def test_env_and_header_variables_are_secrets(agent_dir: Path) -> None:
    write_config(
        agent_dir,
        '\n[[mcp.servers]]\nname = "a"\ncommand = ["x"]\nenv = ["A_TOKEN"]\n'
        '\n[[mcp.servers]]\nname = "b"\nurl = "https://b/mcp"\n'
        'headers_env = { Authorization = "B_AUTH" }\n',
    )
    config = load_config(agent_dir / "bot.toml", env={"A_TOKEN": "aaaaaa", "B_AUTH": "bbbbbb"})
    assert config.secrets.get("A_TOKEN") == "aaaaaa"
    assert config.secrets.get("B_AUTH") == "bbbbbb"
    assert "aaaaaa" not in repr(config)
