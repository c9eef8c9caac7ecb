"""Replicas sharing one inbox, through the host (`bot.host.Host` with a `WorkShare`) on the
in-memory store of `bot.testing` opened as replicas: a conversation runs on one live replica at a
time, in accepted order, and what a killed replica left is taken on by a live one. Fast: no
database, no processes; tests wait on events, never on time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from bot.ports.intake import Admission
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.testing.model import ScriptedModel, answer
from bot.testing.store import open_memory_store
from bot.testing.tables import Tables
from tests.engines import Clock
from tests.host.rig import Rig, rig, submit

Start = Callable[[ScriptedModel], AbstractAsyncContextManager[Rig]]


@pytest.fixture
def tables() -> Tables:
    return Tables(Clock())


@pytest.fixture
def replicas(counter: TokenCounter, tables: Tables) -> Start:
    """Starts a replica on the shared tables: the host on a store opened `shared`, resumed (its
    start sweeps for orphaned work); closed at the end of the block."""

    @asynccontextmanager
    async def start(model: ScriptedModel) -> AsyncIterator[Rig]:
        store = open_memory_store(tables=tables, shared=True)
        # The tests sweep by starting a replica, not by the clock.
        replica = rig(counter, model, store=store, sweep_seconds=3600)
        await replica.host.resume()
        try:
            yield replica
        finally:
            await replica.host.close(grace=0)
            await store.aclose()

    return start


async def test_a_conversation_runs_on_one_replica_in_accepted_order(
    replicas: Start, tables: Tables
) -> None:
    first_model = ScriptedModel(answer("first"), answer("second"), gated=True)
    async with replicas(first_model) as first, replicas(ScriptedModel()) as second:
        assert await submit(first.host, 1) is Admission.ACCEPTED
        await first.model.started.wait()  # turn 1 runs on the first replica
        # Accepted by the second replica while the first runs the conversation: not its to run.
        assert await submit(second.host, 2) is Admission.ACCEPTED
        first.model.release.set()
        await first.host.idle()
        await second.host.idle()

        assert [p.turn_id for p in first.model.plans] == ["turn-1", "turn-2"]
        assert second.model.plans == []
        assert first.deliverer.texts == ["first", "second"]
        assert {row.state for row in tables.items.values()} == {InboxState.ANSWERED}


async def test_what_a_killed_replica_left_is_taken_on_by_a_live_one(
    replicas: Start, tables: Tables
) -> None:
    async with replicas(ScriptedModel(gated=True)) as killed:
        assert await submit(killed.host, 1) is Admission.ACCEPTED
        await killed.model.started.wait()
        killed.store.die()  # its process is gone mid-turn (its host here never finishes)

        async with replicas(ScriptedModel(answer("taken on"))) as live:  # its start sweeps
            await live.host.idle()

            assert [p.turn_id for p in live.model.plans] == ["turn-1"]
            assert live.deliverer.texts == ["taken on"]
            assert [row.state for row in tables.items.values()] == [InboxState.ANSWERED]
        assert killed.deliverer.posted == []
