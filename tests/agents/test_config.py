"""`[[agents]]`, `[handoffs]` and a surface rule's `agents`: what each agent inherits, and the
errors that name the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agents import DEFAULT_AGENT, Roster
from bot.cli.settings import load_config
from bot.errors import ConfigError
from tests.conftest import write_config

TWO = """
[[agents]]
name = "ops"
display_name = "Ops"
icon = ":robot_face:"
identity_path = "ops.md"
tools = ["memory_*"]
memory = "own"

[[agents]]
name = "critic"
model = "claude-haiku-4-5"

[[surfaces]]
platform = "slack"
id = "C1"
agents = ["ops", "critic"]
"""


def _two(agent_dir: Path, extra: str = "") -> Path:
    (agent_dir / "ops.md").write_text("You are Ops.\n", encoding="utf-8")
    return write_config(agent_dir, TWO + extra)


def test_a_config_with_agent_alone_has_the_default_agent(agent_dir: Path) -> None:
    roster = Roster.of(load_config(agent_dir / "bot.toml", env={}).settings)
    assert [agent.name for agent in roster.all] == [DEFAULT_AGENT]
    assert not roster.several


def test_each_agent_inherits_what_it_leaves_unset_from_agent(agent_dir: Path) -> None:
    settings = load_config(_two(agent_dir), env={}).settings
    ops, critic = Roster.of(settings).all
    assert ops.settings is not None
    assert critic.settings is not None
    assert ops.settings.identity_path == agent_dir / "ops.md"  # resolved against the folder
    assert critic.settings.identity_path == agent_dir / "IDENTITY.md"  # [agent]'s
    assert critic.settings.timezone == ops.settings.timezone == "Europe/Berlin"
    assert (ops.shown, ops.icon, ops.memory, ops.tools) == (
        "Ops",
        ":robot_face:",
        "own",
        ("memory_*",),
    )
    assert (critic.shown, critic.model, critic.memory) == ("critic", "claude-haiku-4-5", "shared")
    assert settings.handoffs.max_hops == 3
    assert settings.handoffs.max_agent_turns_per_hour == 20


def test_agent_may_be_left_out_beside_agents(tmp_path: Path) -> None:
    (tmp_path / "ops.md").write_text("You are Ops.\n", encoding="utf-8")
    (tmp_path / "bot.toml").write_text(
        '[[agents]]\nname = "ops"\nidentity_path = "ops.md"\n', encoding="utf-8"
    )
    settings = load_config(tmp_path / "bot.toml", env={}).settings
    assert settings.agent.identity_path == tmp_path / "ops.md"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ('[[agents]]\nname = "Ops Team"\n', "agents[2].name = 'Ops Team': not a usable agent name"),
        ('[[agents]]\nname = "ops"\n', "agents[2].name = 'ops': another [[agents]] entry"),
        (
            '[[surfaces]]\nplatform = "telegram"\nagents = ["writer"]\n',
            "surfaces[1].agents: no agent named 'writer'",
        ),
        (
            '[[surfaces]]\nplatform = "slack"\nid = "C1"\nagents = ["critic"]\n',
            "surfaces[1] and surfaces[0]: both say who answers",
        ),
        ("[handoffs]\nmax_hops = -1\n", "handoffs.max_hops = -1"),
    ],
)
def test_config_errors_name_the_key_and_the_fix(agent_dir: Path, extra: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_two(agent_dir, extra), env={})
    assert says in str(caught.value)
    assert "Fix:" in str(caught.value)


def test_a_missing_identity_file_names_the_agent(agent_dir: Path) -> None:
    extra = '[[agents]]\nname = "scribe"\nidentity_path = "nowhere.md"\n'
    with pytest.raises(ConfigError, match=r"agents\[2\] \(scribe\): agent.identity_path"):
        load_config(_two(agent_dir, extra), env={})
