"""Replicas sharing one inbox, through the host (`bot.host.Host` with a `WorkShare`) on the
in-memory store of `bot.testing` opened as replicas: a conversation runs on one live replica at a
time, in accepted order, and what a killed replica left is taken on by a live one. Fast: no
database, no processes; tests wait on events, never on time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from bot.config import HostSettings
from bot.host import Host
from bot.host.parts import HostStores, Outlets, Thinking
from bot.inbox import InboxState
from bot.ports.intake import Admission
from bot.prompt import TokenCounter
from bot.testing.delivery import RecordingDeliverer
from bot.testing.model import ScriptedModel, answer
from bot.testing.store import MemoryStore, open_memory_store
from bot.testing.tables import Tables
from tests.engines import Clock
from tests.host.test_host_units import no_tools, request
from tests.prompt.builders import make_assembler


@dataclass
class Replica:
    host: Host
    model: ScriptedModel
    store: MemoryStore
    deliverer: RecordingDeliverer


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


@pytest.fixture
def tables() -> Tables:
    return Tables(Clock())


@pytest.fixture
def replicas(
    counter: TokenCounter, tables: Tables
) -> Callable[[ScriptedModel], AsyncIterator[Replica]]:
    @asynccontextmanager
    async def start(model: ScriptedModel) -> AsyncIterator[Replica]:
        store = open_memory_store(tables=tables, shared=True)
        deliverer = RecordingDeliverer()
        host = Host(
            thinking=Thinking(make_assembler(counter, memory_enabled=False), model, no_tools),
            stores=HostStores(store.history, store.inbox, store.outbox, share=store.share),
            outlets=Outlets({"test": deliverer}),
            settings=HostSettings.model_validate({"turns_per_person_per_minute": 0}),
            sweep_seconds=3600,  # the tests sweep by starting a replica, not by the clock
        )
        await host.resume()
        try:
            yield Replica(host, model, store, deliverer)
        finally:
            await host.close(grace=0)
            await store.aclose()

    return start


async def submit(replica: Replica, n: int) -> Admission:
    return await replica.host.submit(request(n), source="test", marks=[f"event-{n}"])


async def test_a_conversation_runs_on_one_replica_in_accepted_order(
    replicas: Callable[[ScriptedModel], AsyncIterator[Replica]], tables: Tables
) -> None:
    first_model = ScriptedModel(answer("first"), answer("second"), gated=True)
    async with replicas(first_model) as first, replicas(ScriptedModel()) as second:
        assert await submit(first, 1) is Admission.ACCEPTED
        await first.model.started.wait()  # turn 1 runs on the first replica
        # Accepted by the second replica while the first runs the conversation: not its to run.
        assert await submit(second, 2) is Admission.ACCEPTED
        first.model.release.set()
        await first.host.idle()
        await second.host.idle()

        assert [p.turn_id for p in first.model.plans] == ["turn-1", "turn-2"]
        assert second.model.plans == []
        assert first.deliverer.texts == ["first", "second"]
        assert {row.state for row in tables.items.values()} == {InboxState.ANSWERED}


async def test_what_a_killed_replica_left_is_taken_on_by_a_live_one(
    replicas: Callable[[ScriptedModel], AsyncIterator[Replica]], tables: Tables
) -> None:
    async with replicas(ScriptedModel(gated=True)) as killed:
        assert await submit(killed, 1) is Admission.ACCEPTED
        await killed.model.started.wait()
        killed.store.die()  # its process is gone mid-turn (its host here never finishes)

        async with replicas(ScriptedModel(answer("taken on"))) as live:  # its start sweeps
            await live.host.idle()

            assert [p.turn_id for p in live.model.plans] == ["turn-1"]
            assert live.deliverer.texts == ["taken on"]
            assert [row.state for row in tables.items.values()] == [InboxState.ANSWERED]
        assert killed.deliverer.posted == []
