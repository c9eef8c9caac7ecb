"""Both store engines behind one fixture: a test module marked `both_engines` runs each of its
tests that use `engine` (or `store`) once on SQLite and once on PostgreSQL; `postgres_only`
runs them on PostgreSQL alone.

`Engine.open(...)` opens the store at the test's own location (a file in tmp_path, or a fresh
schema in the session's PostgreSQL database) with the given settings; opening again reaches the
same data, as a restart would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.cli.stored import open_configured
from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.stores import OpenStore
from tests import postgres

ENGINES = ("sqlite", "postgresql")


class Clock:
    """Unix seconds that only move when a test moves them."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Engine:
    name: str
    location: Path | str  # the SQLite file, or the PostgreSQL URL of the test's schema
    clock: Clock

    @property
    def postgres(self) -> bool:
        return self.name == "postgresql"

    def settings(self, **store: Any) -> StoreSettings:
        if isinstance(self.location, Path):
            return StoreSettings(path=self.location, **store)
        return StoreSettings(url=self.location, **store)

    async def open(
        self,
        memory: MemorySettings | None = None,
        *,
        attachments: AttachmentSettings | None = None,
        **store: Any,
    ) -> OpenStore:
        return await open_configured(
            self.settings(**store),
            memory or MemorySettings(),
            attachments=attachments,
            clock=self.clock,
        )

    def inbox(self, store: Any, **bounds: Any) -> Any:
        """An inbox with its own bounds on the open store's database."""
        from bot.sql.inbox import Inbox

        return Inbox(store.db, self.clock, **bounds)


_state: dict[str, Any] = {}


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PgServer]:
    """The session's PostgreSQL database (created on first use, dropped at the end)."""
    if "server" not in _state:
        _state["server"], _state["why"] = postgres.start()
    server = _state["server"]
    if server is None:
        if postgres.required():
            pytest.fail(f"{postgres.ENV} is set but {_state['why']}")
        pytest.skip(_state["why"])
    yield server
    if _state.get("server") is not None:
        postgres.stop(server)
        _state["server"] = None
        _state["why"] = "dropped"


def skipped_reason() -> str | None:
    """Why the PostgreSQL tests were skipped in this session, if they were."""
    if _state.get("server") is None and _state.get("why") not in (None, "dropped"):
        return str(_state["why"])
    return None


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "bot.sqlite3"


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[OpenStore]:
    """A fresh store of the test's engine, closed after the test."""
    opened = await engine.open()
    yield opened
    await opened.aclose()


@pytest.fixture
async def engine(request: pytest.FixtureRequest, db_path: Path, clock: Clock) -> Engine:
    name = getattr(request, "param", "sqlite")
    if name == "postgresql":
        server: postgres.PgServer = request.getfixturevalue("pg_server")
        return Engine(name, await server.new_schema(), clock)
    return Engine(name, db_path, clock)


def parametrize_engines(metafunc: pytest.Metafunc) -> None:
    """For `pytest_generate_tests`: both engines for tests in modules marked `both_engines`,
    PostgreSQL alone for those marked `postgres_only`."""
    if "engine" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("both_engines"):
        metafunc.parametrize("engine", ENGINES, indirect=True)
    elif metafunc.definition.get_closest_marker("postgres_only"):
        metafunc.parametrize("engine", ["postgresql"], indirect=True)
