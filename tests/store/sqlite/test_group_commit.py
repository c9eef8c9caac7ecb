"""Group commit: writes that queue up while another commits share one transaction, each in its
own savepoint, and every caller learns its own outcome only after the commit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from bot.store.sqlite.db import SqliteDatabase


@pytest.fixture
async def db(tmp_path: Path) -> SqliteDatabase:
    database = await SqliteDatabase.open(tmp_path / "bot.sqlite3")
    await database.write(lambda conn: conn.execute("CREATE TABLE t (v TEXT UNIQUE)"))
    yield database  # type: ignore[misc]
    await database.aclose()


async def insert(conn: aiosqlite.Connection, value: str) -> str:
    await conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
    return value


async def queue_up() -> None:
    """Let the writes just started reach the queue: asyncio runs ready tasks in order, and each
    write takes two steps (its caller's task, then its shielded transaction's) to get there."""
    for _ in range(4):
        await asyncio.sleep(0)


async def values(db: SqliteDatabase) -> list[str]:
    return sorted(row[0] for row in await db.fetch_all("SELECT v FROM t"))


async def test_writes_queued_behind_one_commit_together_after_it(db: SqliteDatabase) -> None:
    holding, release = asyncio.Event(), asyncio.Event()

    async def blocker(conn: aiosqlite.Connection) -> None:
        holding.set()
        await release.wait()

    async def seen_committed(conn: aiosqlite.Connection) -> bool:
        # The reader sees committed data only: "a" is not committed yet when this write runs
        # in the same transaction as the one that inserted it.
        return bool(await db.fetch_all("SELECT v FROM t WHERE v = 'a'"))

    first = asyncio.create_task(db.write(blocker))
    await holding.wait()
    queued = [
        asyncio.create_task(db.write(lambda conn: insert(conn, "a"))),
        asyncio.create_task(db.write(seen_committed)),
    ]
    await queue_up()
    release.set()
    await first

    assert await queued[0] == "a"
    assert await queued[1] is False  # ran in the same transaction as "a", before its commit
    assert await values(db) == ["a"]  # and the transaction committed


async def test_a_failing_write_in_a_group_undoes_only_its_own_changes(db: SqliteDatabase) -> None:
    holding, release = asyncio.Event(), asyncio.Event()

    async def blocker(conn: aiosqlite.Connection) -> None:
        holding.set()
        await release.wait()

    async def half_then_fail(conn: aiosqlite.Connection) -> None:
        await insert(conn, "half")
        await insert(conn, "b")  # the UNIQUE constraint: "b" is already there

    first = asyncio.create_task(db.write(blocker))
    await holding.wait()
    before = asyncio.create_task(db.write(lambda conn: insert(conn, "b")))
    failing = asyncio.create_task(db.write(half_then_fail))
    after = asyncio.create_task(db.write(lambda conn: insert(conn, "c")))
    await queue_up()
    release.set()
    await first

    assert await before == "b"
    with pytest.raises(Exception, match="UNIQUE"):
        await failing
    assert await after == "c"
    assert await values(db) == ["b", "c"]  # "half" was undone with its own write only


async def test_a_lone_write_that_fails_leaves_nothing(db: SqliteDatabase) -> None:
    async def fail(conn: aiosqlite.Connection) -> None:
        await insert(conn, "x")
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        await db.write(fail)

    assert await values(db) == []
    assert await db.write(lambda conn: insert(conn, "y")) == "y"


async def test_an_urgent_write_is_not_grouped_behind_queued_writes(tmp_path: Path) -> None:
    """A delivered mark (urgent) commits in a transaction of its own, before writes queued ahead
    of it: they would hold it back for as long as their commit takes."""
    db = await SqliteDatabase.open(tmp_path / "u.sqlite3")
    order: list[str] = []
    try:
        await db.write(lambda conn: conn.execute("CREATE TABLE t (name TEXT)"))

        def insert(name: str) -> Any:
            async def op(conn: Any) -> None:
                await conn.execute("INSERT INTO t VALUES (?)", (name,))
                order.append(name)

            return op

        async with db._lock:  # a commit under way: what comes now queues
            waiting = [asyncio.ensure_future(db.write(insert(f"slow{i}"))) for i in range(3)]
            waiting.append(asyncio.ensure_future(db.write(insert("mark"), urgent=True)))
            while len(db._queued) + len(db._urgent) < 4:  # each write runs to the lock
                await asyncio.sleep(0)
            assert (len(db._queued), len(db._urgent)) == (3, 1)
        await asyncio.gather(*waiting)
        assert order[0] == "mark"
    finally:
        await db.aclose()
