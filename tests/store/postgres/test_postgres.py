"""What only the PostgreSQL store has: its URL setting, its connection errors, its schema
versions, and tsquery building from hostile text (the shared behaviour is in the both-engines
modules beside this one)."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.cli.settings import load_config
from bot.config import MemorySettings, StoreSettings
from bot.errors import ConfigError, SchemaTooNewError, StoreOpenError
from bot.ports.memory import MemoryCapture, MemoryScope
from bot.ports.stores import OpenStore
from bot.store.postgres import SCHEMA_VERSION, open_pg_store
from bot.store.postgres.fts import tsquery_text
from bot.store.sql.terms import query_terms
from tests import postgres
from tests.engines import Engine

pytestmark = pytest.mark.postgres_only
AT = datetime(2025, 3, 1, tzinfo=UTC)


def test_url_with_a_password_is_refused_without_printing_it(tmp_path) -> None:
    (tmp_path / "bot.toml").write_text(
        '[agent]\nidentity_path = "I.md"\n[store]\nurl = "postgresql://bot:hunter2@db/bot"\n'
    )
    with pytest.raises(ConfigError, match="PGPASSWORD") as raised:
        load_config(tmp_path / "bot.toml", env={}, verify_files=False)
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize("url", ["mysql://db/bot", "db.example:5432", "postgresql://h:x/b"])
def test_a_url_that_is_not_postgresql_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"store\.url|postgresql|valid"):
        StoreSettings(url=url)


async def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreOpenError, match=r"cannot connect.*Fix:"):
        await open_pg_store(
            "postgresql://postgres@127.0.0.1:1/none", StoreSettings(), MemorySettings()
        )


async def test_a_search_path_naming_a_missing_schema_is_a_clear_error(
    pg_server: postgres.PgServer,
) -> None:
    url = postgres.with_database(pg_server.admin, pg_server.database, "no_such_schema")
    with pytest.raises(StoreOpenError, match=r"search_path.*does not exist.*CREATE SCHEMA"):
        await open_pg_store(url, StoreSettings(), MemorySettings())


async def test_schema_is_versioned_and_a_newer_one_is_refused(
    engine: Engine, store: OpenStore
) -> None:
    assert await store.schema_version() == SCHEMA_VERSION
    again = await engine.open()  # a second replica starting: nothing to migrate
    await again.aclose()
    conn = await asyncpg.connect(str(engine.location))
    try:
        await conn.execute("UPDATE bot_schema SET version = version + 1")
    finally:
        await conn.close()

    with pytest.raises(SchemaTooNewError, match="newer than this program"):
        await engine.open()


async def test_memory_text_with_nul_is_kept(store: OpenStore) -> None:
    capture = MemoryCapture("k", "slack:C1", "u1", "Ann", "codename \x00 heron", "ok", AT)
    await store.memory.capture(capture)

    hits = await store.memory.recall("codename heron", MemoryScope("slack:C1"))

    assert [("heron" in hit.text) for hit in hits] == [True]


tsquery_syntax = st.sampled_from(["'", '"', "&", "|", "!", "(", ")", ":", "*", "<->", "\\", "\x00"])
hostile = st.lists(st.one_of(st.text(max_size=12), tsquery_syntax), max_size=30).map("".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.one_of(st.text(), hostile))
async def test_any_text_is_no_query_or_one_postgresql_accepts(store: OpenStore, text: str) -> None:
    if tsquery_text(query_terms(text)) is None:
        assert query_terms(text) == []
    # Through the real search and recall paths: a syntax error would raise here.
    await store.memory.search(text)
    await store.memory.recall(text, MemoryScope("slack:C1"))
