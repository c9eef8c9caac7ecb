"""Turn records: stored as sent but with credentials redacted, listed, bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.logs import remember_secrets
from bot.ports.records import TurnRecord, Usage
from bot.ports.stores import OpenStore
from bot.testing.store import MemoryStore
from tests.engines import Engine

pytestmark = pytest.mark.all_engines

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def record(n: int, key: str = "slack:T1:C1:1.0", text: str = "hello") -> TurnRecord:
    return TurnRecord(
        turn_id=f"turn-{n}",
        conversation_key=key,
        channel="slack",
        started_at=T0 + timedelta(minutes=n),
        finished_at=T0 + timedelta(minutes=n, milliseconds=1500),
        outcome="ok",
        request={"model": "claude", "messages": [{"role": "user", "content": text}]},
        usage=Usage(input_tokens=100, cache_read_tokens=80, output_tokens=20),
        attempts=1,
        details={"floor_unmet": False},
    )


async def test_record_round_trips_with_usage_and_latency(store: OpenStore) -> None:
    await store.records.save(record(1))

    shown = await store.records.show("turn-1")

    assert shown is not None
    assert shown["request"]["messages"][0]["content"] == "hello"
    assert shown["usage"]["cache_read_tokens"] == 80
    assert shown["latency_ms"] == 1500.0
    assert shown["outcome"] == "ok"
    assert await store.records.show("turn-404") is None


async def test_recent_lists_newest_first_per_conversation(store: OpenStore) -> None:
    for n in range(5):
        await store.records.save(record(n, key="a" if n % 2 else "b"))

    assert [r.turn_id for r in await store.records.recent("a")] == ["turn-3", "turn-1"]
    assert [r.turn_id for r in await store.records.recent(limit=2)] == ["turn-4", "turn-3"]
    since = T0 + timedelta(minutes=3)
    assert [r.turn_id for r in await store.records.recent(since=since)] == ["turn-4", "turn-3"]
    assert [r.turn_id for r in await store.records.recent("a", since=since)] == ["turn-3"]


async def test_only_the_newest_records_are_kept(engine: Engine) -> None:
    store = await engine.open(turn_records_keep=3)
    try:
        for n in range(7):
            await store.records.save(record(n))
        kept = [r.turn_id for r in await store.records.recent(limit=100)]
    finally:
        await store.aclose()

    assert kept == ["turn-6", "turn-5", "turn-4"]


async def test_records_are_bounded_in_bytes_keeping_the_newest(engine: Engine) -> None:
    mib = 1024 * 1024
    store = await engine.open(turn_records_max_bytes=mib)
    big = "x" * (400 * 1024)  # each record is a little over 400 KiB
    try:
        for n in range(5):
            await store.records.save(record(n, text=big))
        kept = [r.turn_id for r in await store.records.recent(limit=100)]
        await store.records.save(record(9, text="y" * (2 * mib)))  # alone over the bound
        after_huge = [r.turn_id for r in await store.records.recent(limit=100)]
    finally:
        await store.aclose()

    assert kept == ["turn-4", "turn-3"]  # two fit in 1 MiB, a third would not
    assert after_huge == ["turn-9"]  # the newest always stays, even alone over the bound


TOKENS = st.one_of(
    st.from_regex(r"xoxb-[0-9]{10,12}-[A-Za-z0-9]{20,24}", fullmatch=True),
    st.from_regex(r"xapp-1-[A-Z0-9]{10}-[0-9]{10}-[a-f0-9]{30}", fullmatch=True),
    st.from_regex(r"sk-ant-api03-[A-Za-z0-9_-]{40,60}", fullmatch=True),
    st.from_regex(r"[0-9]{8,10}:[A-Za-z0-9_-]{35}", fullmatch=True),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(token=TOKENS, before=st.sampled_from(["", " ", "\n", "token=", '"', "(", "key:"]))
async def test_no_credential_reaches_the_stored_record(
    store: OpenStore, token: str, before: str
) -> None:
    await store.records.save(record(1, text=f"my token is {before}{token} ok"))

    if isinstance(store, MemoryStore):
        ((_, raw),) = store.tables.records.values()
    else:
        raw = (await store.db.fetch_one("SELECT body FROM turn_records"))["body"]

    assert token not in raw
    assert "[redacted]" in raw


async def test_configured_secret_values_never_reach_a_stored_record(store: OpenStore) -> None:
    token = "hook-token-without-any-shape-77"
    remember_secrets([token])
    await store.records.save(record(77, text=f"x {token} y"))
    stored = await store.records.show("turn-77")
    assert stored is not None
    assert token not in json.dumps(stored)
    assert "x [redacted] y" in json.dumps(stored)
