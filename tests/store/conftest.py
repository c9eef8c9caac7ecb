"""Fixtures for the store tests: a fresh store of the test's engine (`tests.engines`); the clock
and the SQLite path come from the suite's conftest."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.stores import OpenStore
from tests.engines import Clock, Engine

__all__ = ["Clock"]


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[OpenStore]:
    opened = await engine.open()
    yield opened
    await opened.aclose()
