"""The console's book on every engine: a session is found by its key from another replica and
kept after it expires (so its operator is told "expired"), closing forgets it, refused logins
count per name within a window, and the audit reads newest first."""

from __future__ import annotations

import pytest

from bot.ports.console import AuditEntry, ConsoleSession
from bot.ports.stores import OpenStore
from tests.engines import Engine

pytestmark = pytest.mark.all_engines


async def test_a_session_opened_on_one_replica_is_found_on_another_and_closes(
    engine: Engine,
) -> None:
    session = ConsoleSession("ada", "csrf-token", created_at=1000.0, expires_at=2000.0)
    one, two = await engine.open(), await engine.open()
    try:
        await one.console.open_session("digest-1", session)
        assert await two.console.session("digest-1") == session
        assert await two.console.session("digest-2") is None
        await two.console.close_session("digest-1")
        assert await one.console.session("digest-1") is None
    finally:
        await one.aclose()
        await two.aclose()


async def test_an_expired_session_is_kept_a_while_then_dropped_when_another_opens(
    store: OpenStore,
) -> None:
    old = ConsoleSession("ada", "a", created_at=0.0, expires_at=10.0)
    await store.console.open_session("old", old)
    await store.console.open_session("new", ConsoleSession("ada", "b", 20.0, 30.0))
    assert await store.console.session("old") == old  # expired, still known as expired
    await store.console.open_session("later", ConsoleSession("ada", "c", 10 * 86_400.0, 1e9))
    assert await store.console.session("old") is None


async def test_refused_logins_count_per_name_since_a_time(store: OpenStore) -> None:
    for at in (100.0, 200.0, 300.0):
        await store.console.login_failed("ada", at)
    await store.console.login_failed("bob", 300.0)
    assert await store.console.failures("ada", 150.0) == 2
    assert await store.console.failures("bob", 0.0) == 1
    assert await store.console.failures("eve", 0.0) == 0


async def test_the_audit_reads_newest_first(store: OpenStore) -> None:
    for at in (1.0, 3.0, 2.0):
        await store.console.audit(AuditEntry(at, "ada", "pause", f"job-{at}", "paused"))
    found = await store.console.audited(limit=2)
    assert [entry.at for entry in found] == [3.0, 2.0]
    assert found[0] == AuditEntry(3.0, "ada", "pause", "job-3.0", "paused")
