"""Replicas sharing one inbox (`bot.store.postgres.claims` on PostgreSQL, `bot.testing.inbox` in
memory):
a conversation is adopted by one live replica at a time, whole; what a gone replica left is
adopted by a live one; a replica taken for gone can no longer publish. A randomized run of many
replicas accepting, adopting, finishing and dying checks the rules hold at every step and every
item ends exactly once, in order."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from bot.errors import ClaimLost
from bot.ports.intake import WorkShare
from bot.ports.outbox import InboxState, Publication
from bot.ports.stores import OpenStore
from tests.engines import Engine
from tests.ports.test_inbox import part, request

pytestmark = pytest.mark.replica_engines


def share(store: OpenStore) -> WorkShare:
    assert store.share is not None
    return store.share


def answered(item_id: int, key: str = "slack:T1:C1:1.0") -> Publication:
    return Publication(key, item_id=item_id, state=InboxState.ANSWERED)


async def test_a_live_replicas_conversation_is_its_own_until_done(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        one = await first.inbox.accept(request(1), source="slack", marks=["Ev1"])
        assert one is not None
        taken = await share(first).adopt(one.request.conversation_key)
        assert [i.item_id for i in taken.items] == [one.item_id]
        assert not taken.resumed
        # Accepted by the second replica while the first runs the conversation: not its to run.
        two = await second.inbox.accept(request(2), source="slack", marks=["Ev2"])
        assert two is not None
        key = two.request.conversation_key
        assert (await share(second).adopt(key)).items == ()
        assert await share(second).orphaned(10) == []
        # The first finishes its turn; the newer item is then whoever's asks first.
        await first.outbox.publish(answered(one.item_id))
        assert [i.item_id for i in (await share(second).adopt(key)).items] == [two.item_id]
        assert (await share(first).adopt(key)).items == ()
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_gone_replicas_items_and_parts_are_adopted_once(engine: Engine) -> None:
    first, second, third = await engine.open(), await engine.open(), await engine.open()
    key = "slack:T1:C1:1.0"
    try:
        one = await first.inbox.accept(request(1), source="slack", marks=["Ev1"])
        assert one is not None
        await share(first).adopt(key)
        await first.outbox.publish(Publication(key, parts=[part(9, 0)]))
        assert await share(second).orphaned(10) == []
    finally:
        await first.aclose()  # a killed replica's session ends the same way
    try:
        assert await share(second).orphaned(10) == [key]
        taken = await share(second).adopt(key)
        assert [p.part_id for p in taken.parts] == ["turn9.0"]
        assert [i.item_id for i in taken.items] == [one.item_id]
        assert taken.resumed == {one.item_id}
        assert await share(third).orphaned(10) == []
        assert (await share(third).adopt(key)).items == ()  # taken once, by one replica
    finally:
        await second.aclose()
        await third.aclose()


async def test_a_replica_taken_for_gone_cannot_publish(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    key = "slack:T1:C1:1.0"
    try:
        one = await first.inbox.accept(request(1), source="slack", marks=["Ev1"])
        assert one is not None
        await share(first).adopt(key)
        # Its heartbeat connection is lost while it keeps running the turn.
        await engine.lose_heartbeat(first)
        assert [i.item_id for i in (await share(second).adopt(key)).items] == [one.item_id]
        with pytest.raises(ClaimLost):
            await first.outbox.publish(
                Publication(key, parts=[part(1, 0)], item_id=one.item_id, state=InboxState.ANSWERED)
            )
        assert await first.outbox.parts("turn1") == []  # nothing of it was written
        await second.outbox.publish(answered(one.item_id))
        assert await second.inbox.state(one.item_id) is InboxState.ANSWERED  # type: ignore[attr-defined]
    finally:
        await first.aclose()
        await second.aclose()


@dataclass
class Replica:
    store: OpenStore
    lanes: dict[str, list[int]] = field(default_factory=dict)  # adopted, not yet finished


@pytest.mark.parametrize("seed", range(3))
async def test_random_replicas_run_each_item_once_in_order(engine: Engine, seed: int) -> None:
    """Replicas accept, adopt (after their own work, or by sweeping), finish their oldest item
    and die at random; the rules are checked at every step, and at the end every item has ended
    exactly once and each conversation's items ended in accepted order."""
    rng = random.Random(seed)
    keys = [f"slack:T1:C{n}:1.0" for n in range(4)]
    replicas = [Replica(await engine.open()) for _ in range(3)]
    ended: dict[str, list[int]] = {key: [] for key in keys}
    accepted: dict[str, list[int]] = {key: [] for key in keys}
    try:
        for step in range(120):
            replica = rng.choice(replicas)
            action = rng.random()
            if action < 0.35:
                key = rng.choice(keys)
                item = await replica.store.inbox.accept(
                    request(step, key), source="slack", marks=[f"Ev{step}"]
                )
                assert item is not None
                accepted[key].append(item.item_id)
                await _adopt(replica, key, replicas)
            elif action < 0.7:
                await _finish_one(replica, replicas, rng, ended)
            elif action < 0.9:
                for key in await share(replica.store).orphaned(10):
                    await _adopt(replica, key, replicas)
            else:
                await replica.store.aclose()  # killed: what it owned is left behind
                replicas[replicas.index(replica)] = Replica(await engine.open())
        for _ in range(200):  # calm: every replica sweeps and finishes until nothing is left
            for replica in replicas:
                for key in await share(replica.store).orphaned(10):
                    await _adopt(replica, key, replicas)
                await _finish_one(replica, replicas, rng, ended)
        assert ended == accepted
    finally:
        for replica in replicas:
            await replica.store.aclose()


async def _adopt(replica: Replica, key: str, replicas: list[Replica]) -> None:
    taken = await share(replica.store).adopt(key)
    others = [r for r in replicas if r is not replica and r.lanes.get(key)]
    if taken.items or taken.parts:
        # Only when no live replica runs the conversation; what it takes comes after its own.
        assert others == [], f"{key} adopted while another replica runs it"
        ids = [item.item_id for item in taken.items]
        assert ids == sorted(ids)
        lane = replica.lanes.setdefault(key, [])
        assert not lane or not ids or lane[-1] < ids[0]
        lane.extend(ids)


async def _finish_one(
    replica: Replica, replicas: list[Replica], rng: random.Random, ended: dict[str, list[int]]
) -> None:
    busy = [key for key, lane in replica.lanes.items() if lane]
    if not busy:
        return
    key = rng.choice(busy)
    item_id = replica.lanes[key].pop(0)
    await replica.store.outbox.publish(answered(item_id, key))
    ended[key].append(item_id)
    if not replica.lanes[key]:  # done with what it owned: take on what came since, as the host
        del replica.lanes[key]
        await _adopt(replica, key, replicas)
