"""`bot store migrate --to postgresql://...` copies a SQLite store and verifies it; the commands
that read a store (`bot history`, `bot doctor`) then work on PostgreSQL through `store.url`."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import structlog

from bot.cli import main
from bot.config import MemorySettings, StoreSettings
from bot.ports.memory import MemoryCapture, MemoryScope
from bot.ports.records import TurnRecord
from bot.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION
from bot.store.sqlite import open_store
from bot.turns import PrecedingMessage
from tests.engines import Engine
from tests.store.sqlite.helpers import turn

pytestmark = pytest.mark.postgres_only
AT = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
KEY = "slack:T1:C1:1.0"


@pytest.fixture(autouse=True)
def default_logging() -> Iterator[None]:
    """`bot.cli.main` points logging at this test's captured output; leave the defaults after."""
    yield
    structlog.reset_defaults()
    for handler in logging.getLogger().handlers[:]:
        logging.getLogger().removeHandler(handler)


async def seed(path: Path) -> str:
    store = await open_store(StoreSettings(path=path), MemorySettings())
    try:
        for n in range(3):
            await store.history.publish(f"{KEY}{n}", turn(n))
        for n in range(5):
            await store.memory.capture(
                MemoryCapture(KEY, "slack:C1", "u1", "Ann", f"note {n} about herons", "ok", AT)
            )
        await store.memory.capture(
            MemoryCapture(KEY, "slack:C1", "u1", "Ann", "badge 7731 \x00", "Noted.", AT)
        )
        await store.records.save(TurnRecord("turn-1", KEY, "slack", AT, AT, "ok"))
        assert await store.inbox.note(source="slack", marks=["Ev1"])
        await store.buffer.append("telegram:-1", PrecedingMessage(AT, "Bo", "hi"), keep=50)
        (found,) = await store.memory.search("badge")
        return found.id
    finally:
        await store.aclose()


async def bot(*args: str) -> int:
    """The real `bot` entry point, on a thread of its own (it runs its own event loop)."""
    return await asyncio.to_thread(main, list(args))


def config(folder: Path, url: str | None = None) -> Path:
    (folder / "IDENTITY.md").write_text("# Identity\n")
    store = f'url = "{url}"' if url else 'path = "data/bot.sqlite3"'
    path = folder / ("pg.toml" if url else "bot.toml")
    path.write_text(f'[agent]\nidentity_path = "IDENTITY.md"\n[store]\n{store}\n')
    return path


async def test_migrate_copies_every_table_and_verifies_counts(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    badge_id = await seed(tmp_path / "data" / "bot.sqlite3")
    url = str(engine.location)

    assert await bot("--config", str(config(tmp_path)), "store", "migrate", "--to", url) == 0
    out = capsys.readouterr().out
    assert "Every count matches" in out
    assert re.search(r"ok +messages +12 -> 12\n", out)

    store = await engine.open()
    try:
        assert (await store.history.load(f"{KEY}1"))[0].text == "question 1"
        (hit,) = await store.memory.recall("badge 7731", MemoryScope("slack:C1"))
        assert hit.id == badge_id  # ids survive: what `bot memory search` printed stays valid
        assert await store.records.show("turn-1") is not None
        assert not await store.inbox.note(source="slack", marks=["Ev1"])  # still seen once
        assert [m.text for m in await store.buffer.take("telegram:-1")] == ["hi"]
        await store.memory.capture(
            MemoryCapture(KEY, "slack:C1", "u1", "Ann", "a new fact", "ok", AT)
        )
        assert await store.memory.count() == 7  # new ids follow the copied ones
    finally:
        await store.aclose()

    # A second run finds the target full and changes nothing.
    assert await bot("--config", str(config(tmp_path)), "store", "migrate", "--to", url) == 1
    assert "already holds data" in capsys.readouterr().err


def test_migrate_refuses_a_password_in_the_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    to = "postgresql://bot:hunter2@127.0.0.1/bot"
    assert main(["--config", str(config(tmp_path)), "store", "migrate", "--to", to]) == 2
    err = capsys.readouterr().err
    assert "PGPASSWORD" in err
    assert "hunter2" not in err


async def test_history_and_doctor_work_on_postgresql(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = await engine.open()
    await store.history.publish(KEY, turn(1))
    await store.aclose()
    pg = config(tmp_path, str(engine.location))

    assert await bot("--config", str(pg), "history", "show", "--list") == 0
    assert KEY in capsys.readouterr().out
    assert await bot("--config", str(pg), "doctor", "--offline") == 1  # no API key set
    out = capsys.readouterr().out
    assert "ok    database" in out
    assert f"schema version {PG_SCHEMA_VERSION}" in out


async def test_migrate_reads_its_source_and_never_writes_to_it(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The source is opened read-only (SQLite `mode=ro`): a snapshot is copied without a byte
    of it changing, not even the header's change counter, and also when the copy is refused."""
    live = tmp_path / "data" / "bot.sqlite3"
    await seed(live)
    snapshot = tmp_path / "snapshot.sqlite3"
    snapshot.write_bytes(live.read_bytes())
    before = snapshot.read_bytes()
    url = str(engine.location)
    cfg = str(config(tmp_path))

    assert await bot("--config", cfg, "store", "migrate", "--from", str(snapshot), "--to", url) == 0
    assert "Every count matches" in capsys.readouterr().out
    assert snapshot.read_bytes() == before
    assert await bot("--config", cfg, "store", "migrate", "--from", str(snapshot), "--to", url) == 1
    assert "already holds data" in capsys.readouterr().err
    after = snapshot.read_bytes()
    assert after[24:28] == before[24:28]  # the file change counter
    assert after == before
