"""Fixtures for the store tests: a fresh database in tmp_path, a settable clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import MemorySettings, StoreSettings
from bot.store import Store, open_store


class Clock:
    """Unix seconds that only move when a test moves them."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "bot.sqlite3"


@pytest.fixture
async def store(db_path: Path, clock: Clock) -> AsyncIterator[Store]:
    opened = await open_store(StoreSettings(path=db_path), MemorySettings(), clock=clock)
    yield opened
    await opened.aclose()
