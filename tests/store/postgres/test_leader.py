"""Leadership among replicas (`bot.store.postgres.leader`) when a holder's own database session ends
while the holder lives on (a database restart, a cut connection): it knows it lost the duty, and
takes it again as soon as nobody else holds it, so a live replica is never taken for gone for long
and two replicas never act as holders at once for longer than one check."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from structlog.testing import capture_logs

from bot.store.postgres.leader import PgLeadership
from bot.store.postgres.locks import key
from bot.store.postgres.owners import duty
from tests.engines import Engine
from tests.postgres import PgServer
from tests.waiting import GUARD, until

pytestmark = pytest.mark.postgres_only

_HOLDER = """SELECT pid FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND ((classid::bigint << 32) | objid::bigint) = """ + key("'leader:' || $1")


async def holder_pid(url: str, name: str) -> int | None:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        pid = await conn.fetchval(_HOLDER, name)
    finally:
        await conn.close()
    return int(pid) if pid is not None else None


async def cut(url: str, name: str) -> None:
    """End the database session that holds `name`, as a database restart would."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        assert await conn.fetchval(
            f"SELECT pg_terminate_backend(pid) FROM ({_HOLDER}) AS holder", name
        )
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def taken_over(url: str, name: str) -> AsyncIterator[None]:
    """Hold `name` on a session of the test's own until the block ends: queued for the lock first,
    then the holder's session is ended, so the lock passes straight to the test (nobody can take
    it in between)."""
    taker, ender = await asyncpg.connect(url, timeout=10), await asyncpg.connect(url, timeout=10)
    taking = asyncio.create_task(
        taker.execute("SELECT pg_advisory_lock(" + key("'leader:' || $1") + ")", name)
    )
    try:
        async with asyncio.timeout(GUARD):
            pid = taker.get_server_pid()
            while not await ender.fetchval(
                "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", pid
            ):
                await asyncio.sleep(0.01)
            assert await ender.fetchval(
                f"SELECT pg_terminate_backend(pid) FROM ({_HOLDER}) AS holder", name
            )
            await taking
        yield
    finally:
        taking.cancel()
        for conn in (taker, ender):
            conn.terminate()


def events(logs: list[dict[str, object]]) -> list[object]:
    return [line["event"] for line in logs if str(line["event"]).startswith("leadership_")]


async def test_a_holder_whose_session_ended_takes_its_duty_again(engine: Engine) -> None:
    url, name = str(engine.location), f"duty-{uuid.uuid4().hex}"
    holder = PgLeadership(url, retry=0.05)
    await asyncio.wait_for(holder.acquire(name), 10)
    try:
        with capture_logs() as logs:
            async with taken_over(url, name):
                await until(lambda: not holder.holds(name))
                assert events(logs) == ["leadership_lost"]
            await asyncio.wait_for(holder.acquire(name), 10)  # free again: taken back
        assert events(logs) == ["leadership_lost", "leadership_regained"]
        assert holder.holds(name)
        assert await holder_pid(url, name) is not None
    finally:
        await holder.release(name)
    assert not holder.holds(name)
    assert await holder_pid(url, name) is None


async def test_a_lost_duty_goes_to_exactly_one_replica(engine: Engine) -> None:
    url, name = str(engine.location), f"duty-{uuid.uuid4().hex}"
    leaders = [PgLeadership(url, retry=0.05) for _ in range(3)]
    await asyncio.wait_for(leaders[0].acquire(name), 10)
    waiting = [asyncio.create_task(leader.acquire(name)) for leader in leaders[1:]]
    try:
        async with taken_over(url, name):
            await until(lambda: not leaders[0].holds(name))
            assert not any(leader.holds(name) for leader in leaders)
        await until(lambda: sum(leader.holds(name) for leader in leaders) == 1)
        (first,) = [leader for leader in leaders if leader.holds(name)]
        await first.release(name)
        await until(lambda: sum(leader.holds(name) for leader in leaders) == 1)
        assert not first.holds(name)
    finally:
        for task in waiting:
            task.cancel()
        for leader in leaders:
            await leader.release(name)


async def test_a_store_whose_heartbeat_was_cut_is_live_again(engine: Engine) -> None:
    """The heartbeat (`bot.store.postgres.owners`) is a duty like any other: other replicas see this
    one live again within a check (PgStore checks every two seconds)."""
    url, store = str(engine.location), await engine.open()
    try:
        heartbeat = duty(store.owner)  # type: ignore[attr-defined]
        first = await holder_pid(url, heartbeat)
        await cut(url, heartbeat)
        async with asyncio.timeout(15):
            while await holder_pid(url, heartbeat) in (None, first):
                await asyncio.sleep(0.05)
        assert store.leadership is not None
        assert store.leadership.holds(heartbeat)
    finally:
        await store.aclose()


async def test_stores_in_two_schemas_of_one_database_hold_their_duties_each(
    pg_server: PgServer,
) -> None:
    """Two bots on one database, each in a schema of its own: each holds its own polling duty
    and heartbeat (advisory locks are one namespace per database)."""
    first, second = await pg_server.new_schema(), await pg_server.new_schema()
    bots = [PgLeadership(first, retry=0.05), PgLeadership(second, retry=0.05)]
    try:
        for bot in bots:
            await asyncio.wait_for(bot.acquire("telegram-polling"), 5)
        assert all(bot.holds("telegram-polling") for bot in bots)
    finally:
        for bot in bots:
            await bot.release("telegram-polling")
