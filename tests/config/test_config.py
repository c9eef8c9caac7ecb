"""Configuration: defaults < file < environment, path resolution, and errors a person can act on."""

from __future__ import annotations

import asyncio
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from bot.agentfiles import load_agent
from bot.cli.compose import require_api_key
from bot.cli.doctor import diagnose
from bot.cli.settings import Settings, load_config
from bot.cli.wiring.agents import build_assembler
from bot.config.env import env_value
from bot.errors import ConfigError
from bot.prompt import TokenCounter
from tests.conftest import write_config

REPO = Path(__file__).resolve().parents[2]


# Settings that are arrays of tables (`[[surfaces]]`); other lists of tables are inline values.
TABLE_ARRAYS = {"surfaces", "agents", "cron.jobs", "webhooks", "mcp.servers", "console.operators"}
INLINE_TABLES = {"slack.commands"}  # written as one inline table in the example


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for arg in typing.get_args(annotation) or (annotation,):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        if typing.get_args(arg) and (inner := _model_in(arg)) is not None:
            return inner
    return None


def _setting_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key the config model reads, dotted: a table's keys under its name, an inline table
    (a rule's `budget`) or a map (`budget.prices`) as one key."""
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        table = _model_in(field.annotation)
        nested = typing.get_origin(field.annotation) is None or path in TABLE_ARRAYS
        if table is not None and nested and path not in INLINE_TABLES:
            keys |= _setting_keys(table, f"{path}.")
        else:
            keys.add(path)
    return keys


def _example_keys(text: str) -> set[str]:
    """The keys the example names, set or commented out (`# key = value`), by section."""
    section, keys = "", set()
    for line in text.splitlines():
        if header := re.match(r"^#?\s*\[\[?([a-z_.]+)\]\]?\s*(#.*)?$", line):
            section = header.group(1) + "."
        elif key := re.match(r"^#?\s*([a-z_0-9]+)\s*=", line):
            keys.add(section + key.group(1))
    return keys


def test_the_example_config_lists_every_setting_and_no_other() -> None:
    """config/bot.toml says it lists every setting: this keeps it true as settings are added."""
    example = _example_keys((REPO / "config" / "bot.toml").read_text(encoding="utf-8"))
    model = _setting_keys(Settings)
    assert sorted(model - example) == [], "settings the example does not list"
    assert sorted(example - model) == [], "keys in the example that no setting reads"


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


def test_anthropic_base_url_in_the_environment_overrides_the_file(agent_dir: Path) -> None:
    # SPEC §9: env > file > defaults; §8: ANTHROPIC_BASE_URL honoured. BOT_MODEL__BASE_URL, the
    # setting's own variable, is the more specific of the two.
    write_config(agent_dir, "[model]\nbase_url = 'http://127.0.0.1:1'\n")
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    settings = load_config(agent_dir / "bot.toml", env=env).settings
    assert settings.model.base_url == "http://127.0.0.1:9"
    env["BOT_MODEL__BASE_URL"] = "http://127.0.0.1:7"
    settings = load_config(agent_dir / "bot.toml", env=env).settings
    assert settings.model.base_url == "http://127.0.0.1:7"


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
        ("[[surfaces]]\nplatform = 'slak'\n", "surfaces[0].platform = 'slak'"),
    ],
)
def test_bad_values_name_key_value_and_fix(agent_dir: Path, extra: str, expected: str) -> None:
    write_config(agent_dir, extra)
    with pytest.raises(ConfigError) as raised:
        load_config(agent_dir / "bot.toml", env={})
    assert expected in str(raised.value)
    assert str(raised.value).count("Fix:") == 1  # one fix, not the validator's and a generic one


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


def test_a_config_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bot.toml").write_bytes(b"\xff\xfe[agent]\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text.*Fix: save it as UTF-8"):
        load_config(tmp_path / "bot.toml", env={})


def test_a_dotenv_file_that_is_not_utf8_is_a_clear_error(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(agent_dir)
    write_config(agent_dir, "")
    (agent_dir / ".env").write_bytes(b"SOME_TOKEN=x\n\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"\.env: not UTF-8 text.*Fix: save it as UTF-8"):
        load_config(agent_dir / "bot.toml")  # the process environment, and so the .env files


def test_a_config_path_that_is_a_folder_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot be read \(Is a directory\)\. Fix: "):
        load_config(tmp_path, env={})


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
    assert env_value(",".join(items), list[str]) == items


# --- numeric bounds and the context window ------------------------------------------------------


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, list[Any]]]:
    """(dotted name, constraints) of every int or float setting, through nested tables, lists
    and dicts of tables, and `Annotated[...] | None`."""
    found: list[tuple[str, list[Any]]] = []
    for name, field in model.model_fields.items():
        constraints = list(field.metadata)
        kinds: list[Any] = []
        pending = [field.annotation]
        while pending:
            kind = pending.pop()
            if typing.get_origin(kind) is typing.Annotated:
                base, *extra = typing.get_args(kind)
                constraints += [c for info in extra for c in getattr(info, "metadata", [info])]
                pending.append(base)
            elif typing.get_origin(kind) in (list, dict):
                for arg in typing.get_args(kind):
                    if isinstance(arg, type) and issubclass(arg, BaseModel):
                        found += _numeric_fields(arg, f"{prefix}{name}.")
            elif typing.get_args(kind):
                pending += typing.get_args(kind)
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                found += _numeric_fields(kind, f"{prefix}{name}.")
            else:
                kinds.append(kind)
        if any(kind in (int, float) for kind in kinds):
            found.append((prefix + name, constraints))
    return found


def test_every_numeric_setting_has_an_upper_bound() -> None:
    fields = _numeric_fields(Settings)
    assert len(fields) > 20
    unbounded = [
        name
        for name, constraints in fields
        if not any(getattr(c, "le", None) is not None or getattr(c, "lt", None) is not None
                   for c in constraints)
    ]  # fmt: skip
    assert unbounded == []


@given(st.integers(10**9, 10**30))
def test_a_huge_number_is_refused_with_its_key(value: int) -> None:
    for key, section in [("misfire_grace", "cron"), ("shutdown_grace", "host")]:
        with pytest.raises(ConfigError, match=rf"{section}\.{key}"):
            load_config(
                None, env={f"BOT_{section.upper()}__{key.upper()}": str(value)}, verify_files=False
            )


def test_a_window_too_small_for_the_floors_is_a_config_error_for_run_and_doctor(
    agent_dir: Path,
) -> None:
    big_identity = "You are Testbot.\n" + "Remember every rule of the house. " * 600
    (agent_dir / "IDENTITY.md").write_text(big_identity, encoding="utf-8")
    write_config(agent_dir, "[model]\ncontext_window = 6000\nmax_tokens = 1024\n")
    config = load_config(agent_dir / "bot.toml", env={})
    counter = TokenCounter(calibration=config.settings.model.token_calibration)
    with pytest.raises(ConfigError, match=r"model\.context_window \(6000\).*Fix:"):
        build_assembler(config, load_agent(config.settings.agent), counter)
    checks = asyncio.run(diagnose(agent_dir / "bot.toml", offline=True))
    [window] = [check for check in checks if check.name == "context window"]
    assert not window.ok
    assert "model.context_window" in window.detail


# --- errors that point at the real fix ----------------------------------------------------------


def test_no_config_at_the_default_path_suggests_bot_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"no config file at config/bot\.toml.*`bot init`") as e:
        load_config(None, env={})
    assert "required but not set" not in str(e.value)


@pytest.mark.parametrize(
    ("extra", "unknown", "guess"),
    [
        ("[model]\nmax_token = 5\n", "model.max_token", "max_tokens"),
        ("[telegram]\npoll_tokens = 3\n", "telegram.poll_tokens", None),
        ("[slack]\ntoken_cache = 1\n", "slack.token_cache", None),
    ],
)
def test_an_unknown_key_is_called_unknown_even_with_token_in_its_name(
    agent_dir: Path, extra: str, unknown: str, guess: str | None
) -> None:
    write_config(agent_dir, extra)
    with pytest.raises(ConfigError) as e:
        load_config(agent_dir / "bot.toml", env={})
    assert f"{unknown}: unknown key" in str(e.value)
    assert "secrets are never read" not in str(e.value)
    if guess:
        assert f"did you mean {guess}?" in str(e.value)


def test_a_bad_environment_override_names_the_variable_not_the_file(agent_dir: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(agent_dir / "bot.toml", env={"BOT_MODEL__MAX_TOKENS": "lots"})
    assert str(e.value).startswith("environment variable BOT_MODEL__MAX_TOKENS: model.max_tokens")
    assert str(agent_dir) not in str(e.value)


def test_a_misspelled_bot_variable_is_warned_about(agent_dir: Path) -> None:
    config = load_config(agent_dir / "bot.toml", env={"BOT_MODEL_NAME": "claude-opus-4"})
    [warning] = config.warnings
    assert "BOT_MODEL_NAME sets nothing" in warning
    assert "did you mean BOT_MODEL__NAME?" in warning


@pytest.mark.parametrize("key", ["sk-ant-api03-abc\n", " sk-ant-api03-abc", "sk-ant api03"])
def test_an_api_key_with_stray_characters_is_named_as_a_key_problem(
    agent_dir: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    config = load_config(agent_dir / "bot.toml")
    with pytest.raises(ConfigError, match=r"ANTHROPIC_API_KEY (has|holds) .*Fix:"):
        require_api_key(config)
    checks = asyncio.run(diagnose(agent_dir / "bot.toml", offline=True))
    [check] = [c for c in checks if c.name == "ANTHROPIC_API_KEY"]
    assert not check.ok
    assert check.detail.startswith("ANTHROPIC_API_KEY h")  # has stray whitespace / holds ...
    assert key.strip() not in check.detail
