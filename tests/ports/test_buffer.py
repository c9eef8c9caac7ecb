"""The per-chat buffer of Telegram group messages that started no turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.ports.stores import OpenStore
from bot.turns import PrecedingMessage
from tests.engines import Engine

KEEP = 50  # the Telegram channel's default group_buffer

pytestmark = pytest.mark.all_engines

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def message(n: int, text: str | None = None) -> PrecedingMessage:
    return PrecedingMessage(
        at=T0 + timedelta(seconds=n), name=f"Person {n}", text=text or f"line {n}", handle="p"
    )


async def test_take_returns_oldest_first_and_empties(store: OpenStore) -> None:
    for n in range(3):
        await store.buffer.append("telegram:-100", message(n), keep=KEEP)
    await store.buffer.append("telegram:-200", message(9), keep=KEEP)

    taken = await store.buffer.take("telegram:-100")

    assert [m.text for m in taken] == ["line 0", "line 1", "line 2"]
    assert taken[0] == message(0)
    assert await store.buffer.take("telegram:-100") == []
    assert [m.text for m in await store.buffer.take("telegram:-200")] == ["line 9"]


async def test_buffer_keeps_the_newest_per_chat(engine: Engine) -> None:
    store = await engine.open()
    try:
        for n in range(10):
            await store.buffer.append("telegram:-100", message(n), keep=4)
        assert [m.text for m in await store.buffer.take("telegram:-100")] == [
            "line 6",
            "line 7",
            "line 8",
            "line 9",
        ]
    finally:
        await store.aclose()


async def test_buffer_bounds_each_message(store: OpenStore) -> None:
    await store.buffer.append("telegram:-100", message(1, text="w" * 100_000), keep=KEEP)

    (taken,) = await store.buffer.take("telegram:-100")

    assert len(taken.text.encode()) <= 4096


async def test_buffer_survives_a_restart(engine: Engine) -> None:
    first = await engine.open()
    await first.buffer.append("telegram:-100", message(1), keep=KEEP)
    await first.aclose()

    second = await engine.open()
    try:
        assert [m.text for m in await second.buffer.take("telegram:-100")] == ["line 1"]
    finally:
        await second.aclose()
