"""Fixtures for the store tests: a fresh store of the test's engine (`tests.engines`); the clock
and the SQLite path come from the suite's conftest."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import pytest
import structlog

from bot.stores import OpenStore
from tests.engines import Clock, Engine

__all__ = ["Clock"]


@pytest.fixture(autouse=True)
def default_logging() -> Iterator[None]:
    """`bot.cli.main` configures logging for the process onto pytest's capture stream, which is
    closed after the test; start and leave every store test with the library defaults."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
    for handler in logging.getLogger().handlers[:]:
        logging.getLogger().removeHandler(handler)


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[OpenStore]:
    opened = await engine.open()
    yield opened
    await opened.aclose()
