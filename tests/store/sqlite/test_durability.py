"""The database file: owner-only modes, schema versions, unreadable rows, cancelled writes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path

import aiosqlite
import pytest
from structlog.testing import capture_logs

from bot.config import MemorySettings, StoreSettings
from bot.errors import SchemaTooNewError, StoreClosedError
from bot.ports.memory import MemoryScope
from bot.store.sqlite import SqliteStore, open_store
from bot.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from tests.store.sqlite.helpers import turn


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_database_and_folder_are_owner_only(store: SqliteStore, db_path: Path) -> None:
    await store.history.publish("k", turn(1))

    assert mode(db_path.parent) == 0o700
    assert mode(db_path) == 0o600
    for companion in ("-wal", "-shm"):
        assert mode(db_path.with_name(db_path.name + companion)) == 0o600


async def test_a_too_open_existing_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    path.touch()
    os.chmod(path, 0o644)

    store = await open_store(StoreSettings(path=path), MemorySettings())
    await store.aclose()

    assert mode(path) == 0o600


async def test_a_newer_schema_is_refused_with_a_fix(db_path: Path) -> None:
    store = await open_store(StoreSettings(path=db_path), MemorySettings())
    await store.aclose()
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")

    with pytest.raises(SchemaTooNewError, match="upgrade the bot"):
        await open_store(StoreSettings(path=db_path), MemorySettings())


async def test_reopening_keeps_everything(db_path: Path) -> None:
    first = await open_store(StoreSettings(path=db_path), MemorySettings())
    await first.history.publish("k", turn(1))
    await first.inbox.note(source="slack", marks=["Ev1"])
    await first.aclose()

    second = await open_store(StoreSettings(path=db_path), MemorySettings())
    try:
        assert len(await second.history.load("k")) == 4
        assert await second.inbox.note(source="slack", marks=["Ev1"]) is False
    finally:
        await second.aclose()


async def test_unreadable_row_starts_cold_and_is_replaced_next_turn(
    store: SqliteStore, db_path: Path
) -> None:
    await store.history.publish("k", turn(1))
    await store.history.publish("other", turn(1))
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            'UPDATE messages SET body = \'{"role": "user", "blo\' WHERE key = \'k\' AND seq = 1'
        )

    with capture_logs() as logs:
        assert await store.history.load("k") == []
    assert any(e["event"] == "history_unreadable" for e in logs)

    await store.history.publish("k", turn(2))

    assert [e.text for e in await store.history.load("k")] == ["question 2", "", "", "answer 2"]
    assert len(await store.history.load("other")) == 4


async def test_a_cancelled_publish_is_all_or_nothing(store: SqliteStore) -> None:
    await store.history.publish("k", turn(1))

    task = asyncio.create_task(store.history.publish("k", turn(2)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await store.history.publish("other", turn(1))  # runs after the shielded write finished

    texts = [e.text for e in await store.history.load("k")]
    assert texts in (
        ["question 1", "", "", "answer 1"],
        ["question 1", "", "", "answer 1", "question 2", "", "", "answer 2"],
    )


async def test_operations_after_close_fail_clearly(store: SqliteStore) -> None:
    await store.aclose()

    with pytest.raises(StoreClosedError, match="closed"):
        await store.history.load("k")
    with pytest.raises(StoreClosedError, match="closed"):
        await store.history.publish("k", turn(1))


async def test_a_failed_write_rolls_back_and_the_next_one_works(store: SqliteStore) -> None:
    async def fails(conn: aiosqlite.Connection) -> None:
        await conn.execute("DELETE FROM conversations")
        raise RuntimeError("boom")

    await store.history.publish("k", turn(1))
    with pytest.raises(RuntimeError, match="boom"):
        await store.db.write(fails)

    assert await store.history.conversations() == ["k"]
    await store.history.publish("k", turn(2))
    assert len(await store.history.load("k")) == 8


async def test_a_version_1_file_is_migrated_forward_keeping_its_data(db_path: Path) -> None:
    db_path.parent.mkdir(mode=0o700)
    with sqlite3.connect(db_path) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO memories (conversation_key, surface, text, captured_at) "
            "VALUES ('console:a', 'console:a', 'User: the gate code is 4417', 0)"
        )
        conn.execute(
            "INSERT INTO memories (conversation_key, surface, person, text, captured_at) "
            "VALUES ('slack:T:C:1', 'slack:C', 'slack:T:U', 'User (Ann): hi', 3600)"
        )
        conn.execute("INSERT INTO participants VALUES ('slack:T:U', 'slack:C')")

    store = await open_store(StoreSettings(path=db_path), MemorySettings())
    try:
        version = await store.db.fetch_one("PRAGMA user_version")
        hits = await store.memory.recall("gate code", MemoryScope("console:a", surfaceless=True))
        spans = await store.db.fetch_all("SELECT person, surface, since, until FROM participation")
    finally:
        await store.aclose()

    assert version is not None
    assert version[0] == SCHEMA_VERSION == 15  # 15: where each memory came from (SPEC §6)
    assert [hit.text for hit in hits] == ["User: the gate code is 4417"]
    # Who took part where survives as a span from their first to their last memory there.
    assert [tuple(row) for row in spans] == [("slack:T:U", "slack:C", 3600.0, 3600.0)]
