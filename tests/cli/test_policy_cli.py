"""The per-surface policy from the command line: `bot preview` names the rule that matched,
`bot doctor` and start-up refuse a bad template, and `bot usage` groups and filters the stored
usage (person ids stay host-side: they are in the usage report, never in a request)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import structlog

from bot.cli import main
from bot.cli.usage import parse_since
from bot.config import MemorySettings, StoreSettings
from bot.ports.records import Usage, UsageEntry
from bot.store.sqlite import open_store
from tests.cli.conftest import RunBot
from tests.cli.test_cli import HERE
from tests.conftest import write_config


@pytest.fixture(autouse=True)
def default_logging() -> Iterator[None]:
    """`bot.cli.main` configures logging onto pytest's capture stream; leave the defaults."""
    yield
    structlog.reset_defaults()
    for handler in logging.getLogger().handlers[:]:
        logging.getLogger().removeHandler(handler)


RULE = """
[[surfaces]]
platform = "slack"
id = "C0PLATFORM"
instructions = "Platform team: answer with a checklist."
model = "claude-opus-4-1"
"""


def test_preview_names_the_matching_rule_and_uses_it(bot: RunBot, agent_dir: Path) -> None:
    write_config(agent_dir, RULE)
    result = bot(
        "--config", str(agent_dir / "bot.toml"), "preview", str(HERE / "slack-group-event.json")
    )
    assert result.returncode == 0, result.stderr
    assert "surface rule: surfaces[0] (platform slack, id C0PLATFORM)" in result.stderr
    body = json.loads(result.stdout)
    assert body["model"] == "claude-opus-4-1"
    assert "answer with a checklist" in body["system"][-1]["text"]
    assert "U0ALICE7777" not in result.stdout  # the person id never reaches the request


def test_a_bad_template_stops_start_up_and_doctor_says_why(bot: RunBot, agent_dir: Path) -> None:
    (agent_dir / "session.txt").write_text("# Here\n{conversation}\n{surface_nmae}\n")
    write_config(agent_dir, "[prompt]\nsession_template = 'session.txt'\n")
    config = str(agent_dir / "bot.toml")
    started = bot("--config", config, "preview", str(HERE / "slack-group-event.json"))
    assert started.returncode == 2
    assert "unknown slot {surface_nmae}" in started.stderr
    assert "Traceback" not in started.stderr
    doctor = bot("--config", config, "doctor", "--offline")
    assert "FAIL  surfaces and templates" in doctor.stdout
    assert "{surface_nmae}" in doctor.stdout


AT = datetime(2026, 11, 30, 22, 30, tzinfo=UTC)  # 23:30 in Berlin, the config's timezone


def _entry(n: int, at: datetime, surface: str, person: str | None, usage: Usage) -> UsageEntry:
    return UsageEntry(f"turn-{n}", at, "slack", surface, person, "claude-sonnet-4-6", usage, n / 10)


@pytest.fixture
def seeded(agent_dir: Path) -> Path:
    async def seed() -> None:
        store = await open_store(
            StoreSettings(path=agent_dir / "data" / "bot.sqlite3"), MemorySettings()
        )
        try:
            await store.usage.add(_entry(1, AT, "slack:C1", "slack:T:U1", Usage(100, 300, 50, 10)))
            later = AT.replace(hour=23, minute=30)  # 00:30 the next day in Berlin
            await store.usage.add(_entry(2, later, "slack:C2", "slack:T:U1", Usage(200, 0, 0, 20)))
            await store.usage.add(_entry(3, later, "slack:C1", None, Usage(1, 1, 1, 1)))
        finally:
            await store.aclose()

    asyncio.run(seed())
    return agent_dir / "bot.toml"


def usage(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    assert main(["--config", str(config), "usage", *args, "--json"]) == 0
    lines: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return lines


def test_usage_by_surface_person_and_day(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_surface = usage(seeded, capsys, "--by", "surface")
    assert [(line["key"], line["turns"], line["input_tokens"]) for line in by_surface] == [
        ("slack:C1", 2, 101),
        ("slack:C2", 1, 200),
        ("total", 3, 301),
    ]
    c1 = by_surface[0]
    assert (c1["cache_read_tokens"], c1["cache_write_tokens"], c1["output_tokens"]) == (301, 51, 11)
    assert c1["cache_share"] == round(301 / (101 + 301 + 51), 4)
    assert c1["cost_usd"] == pytest.approx(0.4)
    people = [line["key"] for line in usage(seeded, capsys, "--by", "person")]
    assert people == ["(nobody: console or scheduled)", "slack:T:U1", "total"]
    days = usage(seeded, capsys, "--by", "day")
    assert [(line["key"], line["turns"]) for line in days] == [
        ("2026-11-30", 1),
        ("2026-12-01", 2),
        ("total", 3),
    ]
    since = usage(seeded, capsys, "--by", "day", "--since", "2026-12-01")
    assert [line["key"] for line in since] == ["2026-12-01", "total"]


def test_usage_prints_a_table_and_refuses_a_bad_since(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(seeded), "usage", "--by", "surface"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "surface",
        "turns",
        "input",
        "cache",
        "read",
        "cache",
        "write",
        "output",
        "cached",
        "USD",
    ]
    assert table[-1].split()[:3] == ["total", "3", "301"]
    assert main(["--config", str(seeded), "usage", "--since", "last tuesday"]) == 2
    assert "Fix: give 2026-12-01" in capsys.readouterr().err


def test_since_understands_days_hours_and_local_dates() -> None:
    from zoneinfo import ZoneInfo

    zone = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert parse_since("7d", zone, now) == datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert parse_since("24h", zone, now) == datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert parse_since("2026-12-01", zone, now) == datetime(2026, 11, 30, 23, tzinfo=UTC)


NO_LOAD_SKILL = """
[[surfaces]]
platform = "slack"
id = "C0PLATFORM"
tools = ["memory_recall"]
"""


def _listed(out: str) -> list[str]:
    """The tool names `bot tools` printed (one surface: lines after its label)."""
    return [line.split()[0] for line in out.splitlines()[1:] if line.startswith("  ")]


@pytest.mark.parametrize("rule", ["", NO_LOAD_SKILL])
def test_preview_offers_the_tools_bot_tools_lists_and_the_index_agrees(
    agent_dir: Path, capsys: pytest.CaptureFixture[str], rule: str
) -> None:
    """One truth about tools (issue 37): `bot preview` shows the tools `bot tools --surface`
    lists for that surface, and the skill index tells the model to call `load_skill` only where
    it is offered."""
    write_config(agent_dir, rule)
    config = str(agent_dir / "bot.toml")
    assert main(["tools", "--surface", "slack:channel:C0PLATFORM", "--config", config]) == 0
    listed = _listed(capsys.readouterr().out)
    assert main(["preview", str(HERE / "slack-group-event.json"), "--config", config]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [tool["name"] for tool in body.get("tools", [])] == listed
    index = next(block["text"] for block in body["system"] if "# Skills" in block["text"])
    assert ("load_skill" in index) is ("load_skill" in listed)
    assert "summarize" in index  # the skills are still named either way
