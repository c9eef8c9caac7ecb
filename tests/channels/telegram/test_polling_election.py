"""Telegram long polling with replicas: one replica (the holder of the polling duty, a PostgreSQL
advisory lock) polls, the others stand by, and one of them takes over when the holder goes."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from structlog.testing import capture_logs

from bot.store.postgres.leader import PgLeadership
from channels.telegram.channel import TelegramChannel
from channels.telegram.polling import POLLING_DUTY
from tests.channels.telegram.test_channel import Sink, secrets, settings
from tests.engines import Engine
from tests.fakes.telegram import FakeTelegram
from tests.store.postgres.test_leader import cut, taken_over
from tests.waiting import until

pytestmark = pytest.mark.postgres_only


@dataclass
class Replicas:
    """Two replicas' Telegram channels on one database, each with its leadership and its sink."""

    leaders: list[PgLeadership]
    channels: list[TelegramChannel]
    sinks: list[Sink]


@contextlib.asynccontextmanager
async def two_replicas(tg: FakeTelegram, engine: Engine) -> AsyncIterator[Replicas]:
    stores = [await engine.open(), await engine.open()]
    leaders = [PgLeadership(str(engine.location), retry=0.05) for _ in stores]
    channels = [
        TelegramChannel(settings(tg), secrets(tg), buffer=s.buffer, leader=leader)
        for s, leader in zip(stores, leaders, strict=True)
    ]
    try:
        yield Replicas(leaders, channels, [Sink(), Sink()])
    finally:
        for channel in channels:
            await channel.stop()
        for store in stores:
            await store.aclose()


async def test_one_replica_polls_and_another_takes_over(tg: FakeTelegram, engine: Engine) -> None:
    alice = tg.user("Alice")
    chat = tg.private_chat(alice)
    async with two_replicas(tg, engine) as replicas:
        channels, sinks = replicas.channels, replicas.sinks
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
    assert [r.text for r in sinks[0].requests + sinks[1].requests] == ["one", "two", "three"]


async def test_a_dead_holders_duty_passes_to_a_waiting_replica(engine: Engine) -> None:
    url, duty = str(engine.location), f"duty-{uuid.uuid4().hex}"
    # The holder checks its session only once a minute: within this test it is as good as dead.
    holder, waiter = PgLeadership(url, retry=60), PgLeadership(url, retry=0.05)
    await holder.acquire(duty)
    waiting = asyncio.create_task(waiter.acquire(duty))
    await asyncio.sleep(0.3)
    assert not waiting.done()

    await cut(url, duty)  # what the server sees when a replica is SIGKILLed: its session ends
    await asyncio.wait_for(waiting, timeout=10)
    await waiter.release(duty)
    await holder.release(duty)


async def test_a_holder_cut_from_the_database_stops_polling_and_stands_by(
    tg: FakeTelegram, engine: Engine
) -> None:
    """A database restart ends the holder's session: it stops polling (no getUpdates while it does
    not hold the duty), and whichever replica is elected next polls, alone."""
    url = str(engine.location)
    alice = tg.user("Alice")
    chat = tg.private_chat(alice)
    async with two_replicas(tg, engine) as replicas:
        leaders, channels, sinks = replicas.leaders, replicas.channels, replicas.sinks
        with capture_logs() as logs:
            await channels[0].start(sinks[0])
            await tg.push(tg.message(chat, alice, "one"))
            await tg.wait_for(lambda: len(sinks[0].requests) == 1)
            await channels[1].start(sinks[1])
            async with taken_over(url, POLLING_DUTY):
                await until(
                    lambda: "telegram_polling_duty_lost" in [e["event"] for e in logs],
                    within=60,  # a check of the duty, then the poll in flight ends (a guard)
                    state=lambda: (
                        [e["event"] for e in logs],
                        [leader.holds(POLLING_DUTY) for leader in leaders],
                        [call.method for call in tg.calls[-5:]],
                    ),
                )
                polls = len(tg.calls)
                await tg.push(tg.message(chat, alice, "two"))
                await asyncio.sleep(0.2)  # four checks of the duty: nobody polls meanwhile
                assert len(tg.calls) == polls
            await tg.wait_for(lambda: len(sinks[0].requests) + len(sinks[1].requests) == 2)
        (elected,) = [n for n, leader in enumerate(leaders) if leader.holds(POLLING_DUTY)]
    assert [r.text for r in sinks[0].requests + sinks[1].requests] == ["one", "two"]
    assert sinks[elected].requests[-1].text == "two"
