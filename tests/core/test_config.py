"""Configuration: defaults < file < environment, path resolution, and errors a person can act on."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.config import ConfigError, _env_value, load_config
from tests.conftest import write_config

REPO = Path(__file__).resolve().parents[2]


def test_example_config_loads_with_defaults() -> None:
    config = load_config(REPO / "config" / "bot.toml", env={})
    settings = config.settings
    assert settings.agent.identity_path == REPO / "config" / "IDENTITY.md"
    assert settings.model.max_turns == 24
    assert settings.store.history_messages == 64
    assert settings.slack.mode == "socket"
    assert [job.name for job in settings.cron.jobs] == ["weekday-standup"]


def test_relative_paths_resolve_against_the_config_folder(agent_dir: Path) -> None:
    config = load_config(agent_dir / "bot.toml", env={})
    assert config.settings.agent.identity_path == agent_dir / "IDENTITY.md"
    assert config.settings.store.path == agent_dir / "data" / "bot.sqlite3"


def test_environment_overrides_the_file(agent_dir: Path) -> None:
    write_config(agent_dir, "[model]\nmax_turns = 3\nname = 'from-file'\n")
    env = {
        "BOT_MODEL__MAX_TURNS": "7",
        "BOT_SLACK__ALLOWED_CHANNEL_IDS": "C1, C2",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
    settings = load_config(agent_dir / "bot.toml", env=env).settings
    assert settings.model.max_turns == 7
    assert settings.model.name == "from-file"
    assert settings.slack.allowed_channel_ids == ["C1", "C2"]
    assert settings.model.base_url == "http://127.0.0.1:9"


def test_secrets_come_from_the_environment_and_never_show(agent_dir: Path) -> None:
    config = load_config(agent_dir / "bot.toml", env={"ANTHROPIC_API_KEY": "sk-ant-secret123"})
    assert config.secrets.get("ANTHROPIC_API_KEY") == "sk-ant-secret123"
    assert "sk-ant-secret123" not in repr(config)


def test_a_secret_in_the_file_is_refused_with_the_env_variable_to_use(agent_dir: Path) -> None:
    write_config(agent_dir, "[slack]\nbot_token = 'xoxb-1'\n")
    with pytest.raises(ConfigError) as raised:
        load_config(agent_dir / "bot.toml", env={})
    message = str(raised.value)
    assert "slack.bot_token" in message
    assert "SLACK_BOT_TOKEN" in message
    assert "xoxb-1" not in message


def test_unknown_key_names_the_key_and_the_known_ones(agent_dir: Path) -> None:
    write_config(agent_dir, "[model]\nmax_turn = 3\n")
    with pytest.raises(ConfigError) as raised:
        load_config(agent_dir / "bot.toml", env={})
    message = str(raised.value)
    assert "model.max_turn: unknown key" in message
    assert "max_turns" in message


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[model]\nmax_turns = 500\n", "model.max_turns = 500"),
        ("[model]\nmax_turns = 'many'\n", "model.max_turns = 'many'"),
        ("[slack]\nmode = 'carrier-pigeon'\n", "slack.mode = 'carrier-pigeon'"),
        (
            "[[cron.jobs]]\nname = 'x'\nschedule = '* * * * *'\nprompt = 'p'\ntimezone = 'X/Y'\n",
            "cron.jobs[0].timezone = 'X/Y'",
        ),
    ],
)
def test_bad_values_name_key_value_and_fix(agent_dir: Path, extra: str, expected: str) -> None:
    write_config(agent_dir, extra)
    with pytest.raises(ConfigError) as raised:
        load_config(agent_dir / "bot.toml", env={})
    assert expected in str(raised.value)
    assert "Fix:" in str(raised.value)


def test_missing_identity_file_is_a_clear_startup_error(agent_dir: Path) -> None:
    (agent_dir / "IDENTITY.md").unlink()
    with pytest.raises(ConfigError, match=r"agent\.identity_path .*file not found.*Fix"):
        load_config(agent_dir / "bot.toml", env={})


def test_missing_agent_section_says_what_to_add(tmp_path: Path) -> None:
    (tmp_path / "bot.toml").write_text("[model]\nname = 'x'\n")
    with pytest.raises(ConfigError, match="agent: required"):
        load_config(tmp_path / "bot.toml", env={})


def test_invalid_toml_points_at_the_syntax(tmp_path: Path) -> None:
    (tmp_path / "bot.toml").write_text("[agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "bot.toml", env={})


def test_explicit_missing_file_suggests_bot_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bot init"):
        load_config(tmp_path / "nope" / "bot.toml", env={})


def test_env_override_for_unknown_section_is_refused(agent_dir: Path) -> None:
    with pytest.raises(ConfigError, match="BOT_NOPE__X"):
        load_config(agent_dir / "bot.toml", env={"BOT_NOPE__X": "1"})


def test_duplicate_cron_job_names_are_refused(agent_dir: Path) -> None:
    job = "[[cron.jobs]]\nname = 'a'\nschedule = '* * * * *'\nprompt = 'p'\n"
    write_config(agent_dir, job + job)
    with pytest.raises(ConfigError, match="used more than once"):
        load_config(agent_dir / "bot.toml", env={})


_ITEM = st.text(alphabet=st.characters(exclude_characters=",[", exclude_categories=("Cs",)))


@given(st.lists(_ITEM.map(str.strip).filter(bool), max_size=8))
def test_comma_separated_env_lists_round_trip(items: list[str]) -> None:
    assert _env_value(",".join(items), list[str]) == items
