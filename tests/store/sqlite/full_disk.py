"""A full disk for the SQLite store, without root or a tmpfs: the database file is capped at its
current size with `PRAGMA max_page_count`, then filled to the last free page through the
inbox's own `note` (dedupe marks that start nothing), so any later write that needs a page fails
with SQLITE_FULL, as on a full disk. `make_room` lifts the cap: space is back."""

from __future__ import annotations

import sqlite3
from typing import Any

import aiosqlite

NO_CAP = 1_073_741_823  # SQLite's default max_page_count
_FILLER = "x" * 3_000  # about one page per mark


async def fill(store: Any) -> None:
    """Cap the store's file and fill it; afterwards no write that needs a new page succeeds."""

    async def cap(conn: aiosqlite.Connection) -> None:
        async with conn.execute("PRAGMA page_count") as cursor:
            row = await cursor.fetchone()
        assert row is not None
        await conn.execute(f"PRAGMA max_page_count = {int(row[0]) + 8}")

    await store.db.write(cap)
    for n in range(100_000):
        try:
            await store.inbox.note(source="filler", marks=[f"{n}:{_FILLER}"])
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc):
                raise
            # Small marks too, so no half-empty page is left for a small write to slip into.
            for m in range(10_000):
                try:
                    await store.inbox.note(source="filler", marks=[f"small:{m}"])
                except sqlite3.OperationalError:
                    return
    raise AssertionError("the capped store never filled up")


async def make_room(store: Any) -> None:
    await store.db.write(lambda conn: conn.execute(f"PRAGMA max_page_count = {NO_CAP}"))
