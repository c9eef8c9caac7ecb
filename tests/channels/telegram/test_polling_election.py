"""Telegram long polling with replicas: one replica (the holder of the polling duty, a PostgreSQL
advisory lock) polls, the others stand by, and one of them takes over when the holder goes."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from bot.pgstore.leader import PgLeadership
from channels.telegram.channel import TelegramChannel
from tests.channels.telegram.test_channel import Sink, secrets, settings
from tests.engines import Engine
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.postgres_only


async def test_one_replica_polls_and_another_takes_over(tg: FakeTelegram, engine: Engine) -> None:
    stores = [await engine.open(), await engine.open()]
    leaders = [PgLeadership(str(engine.location), retry=0.05) for _ in stores]
    channels = [
        TelegramChannel(settings(tg), secrets(tg), buffer=s.buffer, leader=leader)
        for s, leader in zip(stores, leaders, strict=True)
    ]
    sinks = [Sink(), Sink()]
    alice = tg.user("Alice")
    chat = tg.private_chat(alice)
    try:
        await channels[0].start(sinks[0])
        await tg.push(tg.message(chat, alice, "one"))
        await tg.wait_for(lambda: len(sinks[0].requests) == 1)
        await channels[1].start(sinks[1])
        assert channels[1].connected  # standing by is healthy
        await tg.push(tg.message(chat, alice, "two"))
        await tg.wait_for(lambda: len(sinks[0].requests) == 2)
        assert sinks[1].requests == []

        await channels[0].stop()  # the holder goes: the other replica is elected
        await tg.push(tg.message(chat, alice, "three"))
        await tg.wait_for(lambda: len(sinks[1].requests) == 1)
    finally:
        for channel in channels:
            await channel.stop()
        for store in stores:
            await store.aclose()
    assert [r.text for r in sinks[0].requests + sinks[1].requests] == ["one", "two", "three"]


async def test_a_dead_holders_duty_passes_to_a_waiting_replica(engine: Engine) -> None:
    holder, waiter = (PgLeadership(str(engine.location), retry=0.05) for _ in range(2))
    await holder.acquire("duty")
    waiting = asyncio.create_task(waiter.acquire("duty"))
    await asyncio.sleep(0.3)
    assert not waiting.done()

    # What the server sees when a replica is SIGKILLed: its session ends.
    conn = await asyncpg.connect(str(engine.location))
    try:
        await conn.execute(
            """SELECT pg_terminate_backend(pid) FROM pg_locks
               WHERE locktype = 'advisory' AND granted AND pid != pg_backend_pid()
                 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""
        )
    finally:
        await conn.close()

    await asyncio.wait_for(waiting, timeout=10)
    await waiter.release("duty")
    await holder.release("duty")
