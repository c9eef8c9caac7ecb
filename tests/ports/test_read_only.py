"""A store opened read-only (the inspection commands' way) reads what was written and refuses to
write, on both SQL engines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.cli.stored import open_configured
from bot.config import MemorySettings
from bot.ports.records import TurnRecord
from bot.turns import Outcome
from tests.engines import Engine

pytestmark = pytest.mark.both_engines

AT = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def record(turn_id: str) -> TurnRecord:
    return TurnRecord(turn_id, "slack:T1:C1:1.0", "slack", AT, AT, Outcome.OK)


async def test_a_read_only_store_reads_and_never_writes(engine: Engine) -> None:
    writable = await engine.open()
    try:
        await writable.records.save(record("turn-1"))
    finally:
        await writable.aclose()
    store = await open_configured(engine.settings(), MemorySettings(), read_only=True)
    try:
        shown = await store.records.show("turn-1")
        assert shown is not None
        assert shown["turn_id"] == "turn-1"
        with pytest.raises(Exception, match=r"(?i)read.?only"):
            await store.records.save(record("turn-2"))
    finally:
        await store.aclose()
    again = await engine.open()
    try:
        assert await again.records.show("turn-2") is None
    finally:
        await again.aclose()
