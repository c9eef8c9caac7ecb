"""`bot doctor` starts each MCP server and says what is wrong with one that fails; `bot tools`
lists what each surface is offered. Real processes, as a person runs them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bot.cli import main
from tests.cli.conftest import RunBot
from tests.conftest import write_config
from tests.mcp.conftest import NOTES, SECRET, rule_toml, server_toml

LEAKY = [
    sys.executable,
    "-c",
    "import os, sys; sys.stderr.write('my token is ' + os.environ['NOTES_TOKEN']); sys.exit(1)",
]
GARBAGE = [sys.executable, "-c", "print('this is not JSON-RPC')"]


def servers(tmp: Path) -> str:
    return (
        server_toml()
        + f'\n[[mcp.servers]]\nname = "leaky"\ncommand = {json.dumps(LEAKY)}\n'
        + 'env = ["NOTES_TOKEN"]\n'
        + f'\n[[mcp.servers]]\nname = "garbage"\ncommand = {json.dumps(GARBAGE)}\n'
        + '\n[[mcp.servers]]\nname = "missing"\ncommand = ["/nonexistent/mcp-server"]\n'
    )


def test_doctor_lists_a_good_servers_tools_and_names_each_failure_without_secrets(
    bot: RunBot, agent_dir: Path
) -> None:
    write_config(agent_dir, servers(agent_dir))
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "NOTES_TOKEN": SECRET}
    env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"  # the model check fails; not what we test
    result = bot("doctor", "--config", str(agent_dir / "bot.toml"), env=env)
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    [good] = [line for line in lines if "mcp server notes" in line]
    assert good.startswith("ok")
    assert (
        "stdio: 14 tool(s): add, auth, big, boom, crash, data, delete, grow, image, refuse, search"
        in good
    )
    [leaky] = [line for line in lines if "mcp server leaky" in line]
    assert leaky.startswith("FAIL")
    assert "my token is" in leaky
    assert "Fix:" in leaky
    [garbage] = [line for line in lines if "mcp server garbage" in line]
    assert garbage.startswith("FAIL")
    [missing] = [line for line in lines if "mcp server missing" in line]
    assert missing.startswith("FAIL")
    assert "cannot start '/nonexistent/mcp-server'" in missing
    [unset] = [line for line in lines if line.split()[1:2] == ["NOTES_CALLS"]]
    assert unset.startswith("FAIL")
    assert "export NOTES_CALLS" in unset
    assert SECRET not in result.stdout + result.stderr


def test_tools_lists_what_each_surface_is_offered(bot: RunBot, agent_dir: Path) -> None:
    write_config(agent_dir, server_toml() + rule_toml("C0GENERAL", ["notes__s*"]))
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789"}
    result = bot("tools", "--config", str(agent_dir / "bot.toml"), env=env)
    assert result.returncode == 0, result.stderr
    ruled, rest = result.stdout.split("none (no [[surfaces]] rule matches):")
    assert "surfaces[0] (platform slack, id C0GENERAL):" in ruled
    assert "notes__search  (read-only)" in ruled
    assert "notes__secret" in ruled
    assert "notes__add" not in ruled
    assert "notes__" not in rest
    assert "memory_recall" in rest
    one = bot(
        "tools",
        "--surface",
        "slack:channel:C0GENERAL",
        "--config",
        str(agent_dir / "bot.toml"),
        env=env,
    )
    assert "notes__search" in one.stdout
    assert "none (no" not in one.stdout
    assert NOTES[0] not in one.stdout


def test_tools_and_doctor_in_process(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same commands in this process (their modules' own lines, measured by coverage).
    write_config(
        agent_dir,
        server_toml()
        + '\n[[mcp.servers]]\nname = "missing"\ncommand = ["/nonexistent/mcp-server"]\n'
        + rule_toml("C0GENERAL", ["notes__search"]),
    )
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "NOTES_TOKEN": SECRET,
        "NOTES_CALLS": str(agent_dir / "calls.jsonl"),
    }.items():
        monkeypatch.setenv(name, value)
    config = str(agent_dir / "bot.toml")
    assert main(["tools", "--surface", "slack:channel:C0GENERAL", "--config", config]) == 0
    out = capsys.readouterr().out
    assert "warning: MCP server 'missing'" in out
    assert "  notes__search  (read-only)" in out
    assert main(["tools", "--surface", "slack:room", "--config", config]) == 2
    assert "not a surface kind" in capsys.readouterr().err
    assert main(["doctor", "--config", config]) == 1
    out = capsys.readouterr().out
    assert "mcp server missing" in out
    assert "mcp server notes" in out
    assert SECRET not in out


def test_tools_lists_the_schedule_tool_where_a_rule_offers_it(bot: RunBot, agent_dir: Path) -> None:
    """With `[schedules] allowed` set, the operator's view shows the `schedule` tool exactly
    where the model is offered it: on a surface whose rule lists it, not elsewhere."""
    schedules = '\n[schedules]\nallowed = ["slack:U0ALICE"]\n'
    write_config(agent_dir, schedules + rule_toml("C0GENERAL", ["schedule", "memory_recall"]))
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789"}
    result = bot("tools", "--config", str(agent_dir / "bot.toml"), env=env)
    assert result.returncode == 0, result.stderr
    ruled, rest = result.stdout.split("none (no [[surfaces]] rule matches):")
    assert "  schedule\n" in ruled
    assert "schedule" not in rest


@pytest.mark.parametrize("surface", ["slak:channel", "", "*:dm"])
def test_tools_refuses_a_surface_on_no_platform_the_host_runs(
    agent_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    surface: str,
) -> None:
    """A misspelt platform would otherwise list what no surface is offered, as if it were."""
    write_config(agent_dir, rule_toml("C0GENERAL", ["memory_recall"]))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
    config = str(agent_dir / "bot.toml")
    assert main(["tools", "--surface", surface, "--config", config]) == 2
    err = capsys.readouterr().err
    assert f"--surface {surface!r}" in err
    assert "Fix:" in err
    assert "Traceback" not in err


def test_tools_names_a_failing_server_without_its_secrets(bot: RunBot, agent_dir: Path) -> None:
    """A server that prints the secret it was given on stderr and dies: `bot tools` warns about
    it, as `bot doctor` does, with the value redacted."""
    write_config(
        agent_dir,
        f'\n[[mcp.servers]]\nname = "leaky"\ncommand = {json.dumps(LEAKY)}\n'
        'env = ["NOTES_TOKEN"]\n',
    )
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789", "NOTES_TOKEN": SECRET}
    result = bot("tools", "--config", str(agent_dir / "bot.toml"), env=env)
    assert result.returncode == 0, result.stderr
    assert "warning: MCP server 'leaky'" in result.stdout
    assert "my token is" in result.stdout
    assert SECRET not in result.stdout + result.stderr
