"""The starter config documents every setting the settings model has, and loads as it is."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pydantic import BaseModel

from bot.cli.settings import Settings, load_config
from bot.console.settings import Operator
from bot.mcp.settings import McpServerSettings
from bot.policy.surfaces import SurfaceRule
from channels.cron.settings import CronJob, WebhookSettings

STARTER = resources.files("bot.starter")


def _documented_keys(text: str) -> set[str]:
    """`section.key` for every key line, commented or not, under its [section] heading."""
    keys: set[str] = set()
    section = ""
    for line in text.splitlines():
        stripped = line.lstrip("# ").rstrip()
        heading = re.match(r"^\[\[?([a-z_.]+)\]\]?", stripped)
        if heading:
            section = heading.group(1)
            continue
        key = re.match(r"^([a-z_]+) = ", stripped)
        if key and section:
            keys.add(f"{section}.{key.group(1)}")
    return keys


def _model_keys() -> set[str]:
    keys: set[str] = set()
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            # [[cron.jobs]], [[mcp.servers]], [[console.operators]]: their keys below
            lists = {"cron.jobs", "mcp.servers", "console.operators"}
            keys.update(
                f"{name}.{key}" for key in annotation.model_fields if f"{name}.{key}" not in lists
            )
    keys.update(f"cron.jobs.{key}" for key in CronJob.model_fields)
    keys.update(f"webhooks.{key}" for key in WebhookSettings.model_fields)
    keys.update(f"surfaces.{key}" for key in SurfaceRule.model_fields)
    keys.update(f"mcp.servers.{key}" for key in McpServerSettings.model_fields)
    keys.update(f"console.operators.{key}" for key in Operator.model_fields)
    return keys


def test_every_setting_is_in_the_starter_config() -> None:
    documented = _documented_keys(STARTER.joinpath("bot.toml").read_text(encoding="utf-8"))
    missing = sorted(_model_keys() - documented)
    assert missing == [], f"document these in bot/starter/bot.toml: {missing}"


def test_the_starter_documents_no_setting_that_does_not_exist() -> None:
    documented = _documented_keys(STARTER.joinpath("bot.toml").read_text(encoding="utf-8"))
    assert sorted(documented - _model_keys()) == []


def test_the_starter_folder_loads_as_it_is(tmp_path: Path) -> None:
    for name in ("bot.toml", "IDENTITY.md"):
        (tmp_path / name).write_text(STARTER.joinpath(name).read_text(encoding="utf-8"))
    skill = tmp_path / "skills" / "summarize" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(STARTER.joinpath("skills/summarize/SKILL.md").read_text(encoding="utf-8"))
    config = load_config(tmp_path / "bot.toml", env={})
    assert config.settings.agent.identity_path == tmp_path / "IDENTITY.md"


def test_the_readme_configuration_table_covers_every_setting() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_.\[\]]+)` \|", readme, flags=re.MULTILINE)
    documented = {row.replace("[]", "") for row in rows}
    assert sorted(_model_keys() - documented) == []
    assert sorted(documented - _model_keys()) == []


def test_new_apps_get_agent_messaging_and_configs_without_the_key_keep_the_pane(
    tmp_path: Path,
) -> None:
    for name in ("bot.toml", "IDENTITY.md"):
        (tmp_path / name).write_text(STARTER.joinpath(name).read_text(encoding="utf-8"))
    assert load_config(tmp_path / "bot.toml", env={}).settings.slack.messaging == "agent"
    starter = (tmp_path / "bot.toml").read_text(encoding="utf-8")
    (tmp_path / "bot.toml").write_text(starter.replace('messaging = "agent"', ""))
    assert load_config(tmp_path / "bot.toml", env={}).settings.slack.messaging == "assistant"


def test_the_readme_says_which_tests_need_postgresql_and_how_to_point_them_at_one() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    test_section = readme.split("## Test\n", 1)[1].split("\n## ", 1)[0]
    assert "TEST_POSTGRES_URL=postgresql://" in test_section
    assert "postgres_only" in test_section
    assert "skipped" in test_section


def test_the_readme_says_the_surface_id_reaches_the_model() -> None:
    """SPEC §3: the surface id is model-visible; the README must not say ids never are."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "model never sees where its answer goes: channel," not in readme
    assert "the surface's kind, name and id" in readme
