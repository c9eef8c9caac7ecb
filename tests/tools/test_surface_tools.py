"""Least privilege per surface: a rule's `tools` globs decide which tool names are offered; a
surface without such a rule gets the built-in tools only (`offered_tools`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.cli.settings import load_config
from bot.errors import ConfigError
from bot.policy.surfaces import BUILTIN_TOOLS, SurfaceRule, offered_tools
from tests.conftest import write_config

NAMES = sorted(
    [
        "load_skill",
        "memory_recall",
        "notes__add",
        "notes__search",
        "read_attachment",
        "tickets__create",
        "tickets__delete",
    ]
)


def rule(tools: list[str] | None) -> SurfaceRule:
    return SurfaceRule(platform="slack", tools=tools)


def test_without_a_tools_rule_only_the_built_in_tools_are_offered() -> None:
    expected = ("load_skill", "memory_recall", "read_attachment")
    assert offered_tools(None, NAMES) == expected
    assert offered_tools(rule(None), NAMES) == expected


def test_globs_choose_exactly_the_matching_names_built_ins_included_only_when_listed() -> None:
    assert offered_tools(rule(["notes__*"]), NAMES) == ("notes__add", "notes__search")
    assert offered_tools(rule(["notes__*", "memory_recall"]), NAMES) == (
        "memory_recall",
        "notes__add",
        "notes__search",
    )
    assert offered_tools(rule(["tickets__c?eate", "Notes__*"]), NAMES) == ("tickets__create",)
    assert offered_tools(rule([]), NAMES) == ()
    assert offered_tools(rule(["*"]), NAMES) == tuple(NAMES)


@given(
    st.lists(st.sampled_from(["notes__*", "*__add", "memory_recall", "t*", "*", "x"]), max_size=4),
    st.permutations(NAMES),
)
def test_the_same_allowed_set_gives_the_same_list_whatever_the_globs_order(
    globs: list[str], shuffled: list[str]
) -> None:
    offered = offered_tools(rule(globs), NAMES)
    assert offered == offered_tools(rule(list(reversed(globs))), NAMES)
    assert list(offered) == sorted(offered)
    assert set(offered) <= set(NAMES)
    assert set(offered_tools(rule(globs), shuffled)) == set(offered)


def test_the_built_in_names_are_the_hosts_own_tools() -> None:
    assert frozenset({"memory_recall", "read_attachment", "load_skill"}) == BUILTIN_TOOLS


def test_tools_load_from_the_config(agent_dir: Path) -> None:
    write_config(agent_dir, "[[surfaces]]\nplatform = 'slack'\ntools = ['notes__*']\n")
    [loaded] = load_config(agent_dir / "bot.toml", env={}).settings.surfaces
    assert loaded.tools == ["notes__*"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[[surfaces]]\nplatform = 'slack'\ntools = 'notes__*'\n", r"surfaces\[0\]\.tools"),
        ("[[surfaces]]\nplatform = 'slack'\ntools = ['a b']\n", r"surfaces\[0\]\.tools\[0\]"),
        ("[[surfaces]]\nplatform = 'slack'\ntools = ['']\n", r"Fix: set surfaces.tools"),
    ],
)
def test_bad_tool_globs_are_config_errors_naming_the_key(
    agent_dir: Path, extra: str, message: str
) -> None:
    write_config(agent_dir, extra)
    with pytest.raises(ConfigError, match=message):
        load_config(agent_dir / "bot.toml", env={})
