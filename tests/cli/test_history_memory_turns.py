"""`bot history`, `bot memory` and `bot turns` against a real store file, through `bot.cli.main`."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import MemorySettings, StoreSettings
from bot.ports.memory import MemoryCapture
from bot.ports.records import TurnRecord, Usage
from bot.store.sqlite import open_store
from tests.store.sqlite.helpers import turn

KEY = "slack:T1:C1:1.0"
AT = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "IDENTITY.md").write_text("# Identity\n")
    path = tmp_path / "bot.toml"
    path.write_text('[agent]\nidentity_path = "IDENTITY.md"\n[store]\npath = "data/bot.sqlite3"\n')
    return path


@pytest.fixture
def seeded(config_path: Path) -> Path:
    async def seed() -> None:
        store = await open_store(
            StoreSettings(path=config_path.parent / "data" / "bot.sqlite3"), MemorySettings()
        )
        try:
            await store.history.publish(KEY, turn(1))
            await store.memory.capture(
                MemoryCapture(KEY, "slack:C1", "u1", "Alice (@alice)", "badge 7731", "Noted.", AT)
            )
            await store.records.save(
                TurnRecord(
                    "turn-1",
                    KEY,
                    "slack",
                    AT,
                    AT,
                    "ok",
                    request={"messages": [{"role": "user", "content": "key xoxb-1234567890-abc"}]},
                    usage=Usage(input_tokens=120, output_tokens=9),
                )
            )
        finally:
            await store.aclose()

    asyncio.run(seed())
    return config_path


def bot(config: Path, *args: str) -> int:
    return main(["--config", str(config), *args])


def test_history_show_list_and_reset(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bot(seeded, "history", "show", "--list") == 0
    assert KEY in capsys.readouterr().out

    assert bot(seeded, "history", "show", KEY) == 0
    shown = capsys.readouterr().out
    assert "[1] user · Alice (@alice)" in shown
    assert "-> tool call memory_recall (call-1)" in shown
    assert "answer 1" in shown

    assert bot(seeded, "history", "show", KEY, "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["speaker"] == "Alice (@alice)"

    assert bot(seeded, "history", "reset", KEY) == 0
    assert bot(seeded, "history", "show", KEY) == 1
    assert "no stored conversation" in capsys.readouterr().err


def test_memory_search_and_forget(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bot(seeded, "memory", "search", "badge") == 0
    assert " · origin unlisted\n" in capsys.readouterr().out  # the host's stamp, for operators
    assert bot(seeded, "memory", "search", "badge", "--json") == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert "User (Alice (@alice)): badge 7731" in found["text"]
    assert found["origin"] == "unlisted"

    assert bot(seeded, "memory", "forget", found["id"]) == 0
    assert bot(seeded, "memory", "forget", found["id"]) == 1
    assert bot(seeded, "memory", "forget", "nope") == 1
    assert "not a number" in capsys.readouterr().err
    assert bot(seeded, "memory", "forget", "99999999999999999999") == 1  # past 64 bits
    [line] = capsys.readouterr().err.splitlines()
    assert "out of range" in line
    assert "Fix:" in line
    assert bot(seeded, "memory", "search", "badge") == 0
    assert "No memory entry matches." in capsys.readouterr().out


def test_turns_show_and_list(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bot(seeded, "turns", "show", "turn-1") == 0
    shown = capsys.readouterr().out
    assert "outcome       ok" in shown
    assert "xoxb-1234567890" not in shown

    assert bot(seeded, "turns", "list", "--conversation", KEY) == 0
    assert "turn-1" in capsys.readouterr().out
    assert bot(seeded, "turns", "show", "turn-2") == 1


def test_a_limit_past_64_bits_lists_everything_without_a_traceback(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "99999999999999999999"
    assert bot(seeded, "turns", "list", "--limit", huge) == 0
    assert "turn-1" in capsys.readouterr().out
    assert bot(seeded, "memory", "search", "badge", "--limit", huge) == 0
    assert "badge 7731" in capsys.readouterr().out


def test_a_missing_database_is_reported_not_created(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bot(config_path, "history", "show", "--list") == 1

    assert "no database here yet" in capsys.readouterr().err
    assert not (config_path.parent / "data").exists()


def test_turns_show_redacts_configured_secrets_of_any_shape(
    config_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    signing = "plain-looking-signing-value-5Kq2"  # no credential shape: only its value says
    webhook = "webhook-secret-value-8Zr4"

    async def seed() -> None:
        store = await open_store(
            StoreSettings(path=config_path.parent / "data" / "bot.sqlite3"), MemorySettings()
        )
        try:
            content = f"the secret is {signing} and {webhook}"
            request = {"messages": [{"role": "user", "content": content}]}
            await store.records.save(TurnRecord("turn-9", KEY, "slack", AT, AT, "ok", request))
        finally:
            await store.aclose()

    asyncio.run(seed())
    monkeypatch.setenv("SLACK_SIGNING_SECRET", signing)
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", webhook)
    for extra in ((), ("--json",)):
        assert bot(config_path, "turns", "show", "turn-9", *extra) == 0
        shown = capsys.readouterr().out
        assert "the secret is" in shown
        assert signing not in shown
        assert webhook not in shown


def test_read_only_commands_answer_while_a_writer_holds_the_lock(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running host mid-write holds SQLite's write lock; the inspection commands never take
    it. The lock is held for good here: a command that waited for it would fail, not pass."""
    writer = sqlite3.connect(seeded.parent / "data" / "bot.sqlite3", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM turn_records")  # uncommitted: readers still see the record
        assert bot(seeded, "turns", "show", "turn-1") == 0
        assert "turn-1" in capsys.readouterr().out
        for command in (
            ("turns", "list"),
            ("history", "show", KEY),
            ("history", "show", "--list"),
            ("memory", "search", "badge"),
            ("usage",),
            ("approvals",),
            ("cron", "list"),
        ):
            assert bot(seeded, *command) == 0, command
        assert "badge 7731" in capsys.readouterr().out
    finally:
        writer.execute("ROLLBACK")
        writer.close()
