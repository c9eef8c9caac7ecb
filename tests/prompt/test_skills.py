"""Skills: body cap, index bound, `/skill` commands, and reading the agent's files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.agentfiles import default_guardrails, load_agent
from bot.config import AgentSettings
from bot.errors import ConfigError, UnknownSkill
from bot.prompt import Skill, TokenCounter
from bot.prompt.skills import INDEX_MAX_BYTES, capped_body, render_index

from .builders import make_agent, make_assembler, slack_request, wire_body

# --- body cap -----------------------------------------------------------------------------------


@given(st.text(min_size=1), st.integers(min_value=1, max_value=400))
def test_capped_body_is_a_utf8_safe_prefix_with_a_note(body: str, limit: int) -> None:
    skill = Skill("big", "d", body)
    capped = capped_body(skill, limit)
    stripped = body.strip()
    if len(stripped.encode()) <= limit:
        assert capped == stripped
    else:
        kept, note = capped.split("\n\n[Skill 'big' is cut here", 1)
        assert stripped.startswith(kept)
        assert len(kept.encode()) <= limit
        assert f"only the first {limit} are shown" in note


def test_selected_body_is_capped_in_the_system_prompt(counter: TokenCounter) -> None:
    agent = make_agent(selected=("huge",), skills=(Skill("huge", "d", "ü" * 1000),))
    body = wire_body(
        make_assembler(counter, agent=agent, skill_max_bytes=256).assemble(slack_request(), [])
    )
    section = body["system"][2]["text"]
    assert section.startswith("# Skill: huge\n\n" + "ü" * 128 + "\n\n[Skill 'huge' is cut here")


# --- index --------------------------------------------------------------------------------------


def test_index_lists_one_line_per_skill_and_mentions_load_skill() -> None:
    index = render_index([Skill("a", "first\nline two", "x"), Skill("b", "second", "y")])
    lines = index.split("\n")
    assert "`load_skill`" in lines[1]
    assert lines[2:] == ["- a: first line two", "- b: second"]


def test_index_is_bounded_with_an_omitted_count() -> None:
    skills = [Skill(f"skill-{i:04d}", "describes something " * 10, "b") for i in range(400)]
    index = render_index(skills)
    assert len(index.encode()) <= INDEX_MAX_BYTES
    listed = sum(line.startswith("- skill-") for line in index.split("\n"))
    assert 0 < listed < 400
    assert index.endswith(f"({400 - listed} more skills are not listed: the index is full.)")


def test_no_index_when_every_skill_is_selected(counter: TokenCounter) -> None:
    agent = make_agent(selected=("summarize", "research", "standup"))
    body = wire_body(make_assembler(counter, agent=agent).assemble(slack_request(), []))
    assert not any("Skills you can load" in b["text"] for b in body["system"])
    assert [b["text"].split("\n")[0] for b in body["system"][2:-1]] == [
        "# Skill: summarize",
    ]


# --- /skill commands ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names", "rest"),
    [
        ("/summarize the thread", ("summarize",), "the thread"),
        ("/summarize", ("summarize",), ""),
        ("/standup\nplease", ("standup",), "please"),  # selected skills may be named too
        ("/Research why", ("research",), "why"),
        ("/research@quill_bot why", (), "/research@quill_bot why"),  # the channel's to strip
        ("just text", (), "just text"),
        ("/etc/hosts is odd", (), "/etc/hosts is odd"),
        ("/compact", (), "/compact"),
        ("/compact now", (), "/compact now"),
        (" /summarize leading space", (), " /summarize leading space"),
    ],
)
def test_split_skill_command(
    counter: TokenCounter, text: str, names: tuple[str, ...], rest: str
) -> None:
    skills, remaining = make_assembler(counter).split_skill_command(text)
    assert tuple(s.name for s in skills) == names
    assert remaining == rest


def test_unknown_skill_reply_names_it_and_lists_known(counter: TokenCounter) -> None:
    with pytest.raises(UnknownSkill) as caught:
        make_assembler(counter).split_skill_command("/sumarize this")
    message = str(caught.value)
    assert '"sumarize"' in message
    assert "/research, /standup, /summarize" in message


def test_unknown_skill_without_any_skills(counter: TokenCounter) -> None:
    assembler = make_assembler(counter, agent=make_agent(selected=(), skills=()))
    with pytest.raises(UnknownSkill, match="no skills are set up"):
        assembler.split_skill_command("/anything")


# --- agent files --------------------------------------------------------------------------------


def _skill_file(root: Path, folder: str, text: str) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / folder / "SKILL.md").write_text(text, encoding="utf-8")


def _settings(tmp_path: Path, **overrides: object) -> AgentSettings:
    identity = tmp_path / "IDENTITY.md"
    if not identity.exists():
        identity.write_text("# Identity\nYou are Quill.\n", encoding="utf-8")
    values: dict[str, object] = {"identity_path": identity, "skills_root": tmp_path / "skills"}
    values.update(overrides)
    return AgentSettings.model_validate(values)


def test_load_agent_reads_everything(tmp_path: Path) -> None:
    _skill_file(
        tmp_path / "skills",
        "summarize",
        "---\nname: summarize\ndescription: 'Sum up.'\n---\n# Body\nDo it.\n",
    )
    _skill_file(
        tmp_path / "skills", "research", '---\nname: research\ndescription: "Dig"\n---\nLook.\n'
    )
    agent = load_agent(_settings(tmp_path, selected_skills=["research"]))
    assert agent.identity.startswith("# Identity")
    assert agent.guardrails == default_guardrails()
    assert agent.skills == (
        Skill("research", "Dig", "Look."),
        Skill("summarize", "Sum up.", "# Body\nDo it."),
    )
    assert agent.selected == ("research",)


def test_soul_path_replaces_the_default_guardrails(tmp_path: Path) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_text("Our own rules.", encoding="utf-8")
    (tmp_path / "skills").mkdir()
    assert load_agent(_settings(tmp_path, soul_path=soul)).guardrails == "Our own rules."


def test_example_config_agent_loads() -> None:
    root = Path(__file__).resolve().parents[2] / "config"
    agent = load_agent(
        AgentSettings(identity_path=root / "IDENTITY.md", skills_root=root / "skills")
    )
    assert [s.name for s in agent.skills] == ["summarize"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", "does not start with front matter"),
        ("---\nname: s\ndescription: d\n", "never closed"),
        ("---\nname: s\n---\nbody\n", "no `description`"),
        ("---\ndescription: d\n---\nbody\n", "no `name`"),
        ("---\nname: other\ndescription: d\n---\nbody\n", "must equal its folder name"),
        ("---\nname: s\ndescription: d\njust words\n---\nbody\n", "line 4"),
        ("---\nname: s\ndescription: d\n---\n\n", "no instructions"),
    ],
)
def test_malformed_skill_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    _skill_file(tmp_path / "skills", "s", text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_agent(_settings(tmp_path))
    assert "Fix" in str(caught.value) or "SKILL.md" in str(caught.value)


def test_missing_identity_is_a_config_error(tmp_path: Path) -> None:
    settings = AgentSettings(identity_path=tmp_path / "nope.md")
    with pytest.raises(ConfigError, match=r"agent.identity_path .*file not found.*Fix"):
        load_agent(settings)


def test_empty_identity_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "IDENTITY.md").write_text("  \n", encoding="utf-8")
    (tmp_path / "skills").mkdir()
    with pytest.raises(ConfigError, match="empty"):
        load_agent(_settings(tmp_path))


def test_unknown_selected_skill_is_a_config_error(tmp_path: Path) -> None:
    _skill_file(tmp_path / "skills", "summarize", "---\nname: summarize\ndescription: d\n---\nb\n")
    with pytest.raises(ConfigError, match=r"'research' not found.*skills found: summarize"):
        load_agent(_settings(tmp_path, selected_skills=["research"]))


def test_non_utf8_skill_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "skills" / "s").mkdir(parents=True)
    (tmp_path / "skills" / "s" / "SKILL.md").write_bytes(b"---\nname: s\xff\n---\n")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_agent(_settings(tmp_path))


def test_skills_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent\.skills_root"):
        load_agent(_settings(tmp_path))
