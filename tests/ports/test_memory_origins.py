"""Memory origins on every engine (SPEC §6): stamped at capture and kept, shown to operators and
to the person, and backfilled on an older database from what each row proves, never raised."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.ports.memory import MemoryCapture, MemoryScope
from bot.ports.stores import OpenStore
from bot.store.postgres import schema as pg_schema
from bot.store.sqlite import schema as sqlite_schema
from bot.turns import Origin
from tests.engines import Engine
from tests.store.older import at_version

pytestmark = pytest.mark.all_engines

AT = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def told(origin: Origin, person: str | None, said: str) -> MemoryCapture:
    return MemoryCapture("slack:T:C:1", "slack:C", person, "Ann", said, "ok", AT, origin=origin)


async def test_each_entry_keeps_its_origin_and_recall_says_whose_words_it_holds(
    store: OpenStore,
) -> None:
    await store.memory.capture(told(Origin.PERSON, "slack:T:ANN", "the heron gate is red"))
    await store.memory.capture(told(Origin.BOT, "slack:T:B1", "the heron gate is green"))
    hits = await store.memory.recall("heron gate", MemoryScope("slack:C", "slack:T:ANN"))
    own, _ = await store.memory.own("slack:T:ANN", MemoryScope("slack:C"), 5)
    found = await store.memory.search("heron")
    by_words = {hit.said: (hit.origin, hit.own) for hit in hits}
    assert by_words == {
        "the heron gate is red": (Origin.PERSON, True),
        "the heron gate is green": (Origin.BOT, False),
    }
    assert [entry.origin for entry in own] == [Origin.PERSON]
    assert sorted(item.origin for item in found) == [Origin.BOT, Origin.PERSON]


@pytest.mark.both_engines
async def test_an_older_database_is_backfilled_from_what_each_row_proves(engine: Engine) -> None:
    schema = sqlite_schema if engine.name == "sqlite" else pg_schema
    before = schema.MIGRATIONS.index(schema._V_MEMORY_ORIGINS)
    rows = [
        ("console:abc", "console:abc", "NULL", "User: the heron code is 1"),
        ("cron:daily", "cron:daily", "NULL", "User: heron report"),
        ("slack:T:C:1", "slack:C", "'slack:T:ANN'", "User (Ann): my heron is grey"),
    ]
    await at_version(
        engine,
        before,
        *(
            "INSERT INTO memories (conversation_key, surface, person, text, captured_at) "
            f"VALUES ('{key}', '{surface}', {person}, '{text}', 0)"
            for key, surface, person, text in rows
        ),
    )
    store = await engine.open()
    try:
        found = await store.memory.search("heron")
    finally:
        await store.aclose()
    assert {item.conversation_key: item.origin for item in found} == {
        "console:abc": Origin.OPERATOR,
        "cron:daily": Origin.SCHEDULED,
        "slack:T:C:1": Origin.UNLISTED,  # nobody knows now whether an allowlist named Ann
    }
