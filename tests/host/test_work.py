"""Where turns come from (`bot.host.work`): one process resuming what an earlier one left, and a
replica adopting conversations on a shared store, through the in-memory store of `bot.testing`
(opened again on the same tables for a restart, opened `shared` for replicas)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from bot.ports.intake import Admission, InboxItem
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.testing.inbox import MemoryInbox
from bot.testing.model import ScriptedModel
from bot.testing.store import MemoryStore, open_memory_store
from bot.turns import TurnRequest
from tests.host.rig import KEY, request, rig, submit
from tests.waiting import until


class _LateHandover(MemoryInbox):
    """An inbox whose `accept` stores the item (`stored` is set), then waits for `go` before
    it returns, as if the intake that stored it were still on its way to the host; `read` is
    set when `pending` has read the pending items."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store.opened, store.buffer)
        self.stored = asyncio.Event()
        self.go = asyncio.Event()
        self.read = asyncio.Event()

    async def accept(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> InboxItem | None:
        item = await super().accept(request, source=source, marks=marks, consumes=consumes)
        self.stored.set()
        await self.go.wait()
        return item

    async def pending(self) -> list[InboxItem]:
        found = await super().pending()
        self.read.set()
        return found


async def test_on_resume_what_an_earlier_process_left_runs_before_what_came_since(
    counter: TokenCounter,
) -> None:
    earlier = open_memory_store()
    await earlier.inbox.accept(request(1, text="left pending"), source="test", marks=["event-1"])
    await earlier.aclose()  # the earlier process stopped with turn 1 pending
    restarted = open_memory_store(tables=earlier.tables)
    r = rig(counter, ScriptedModel(), store=restarted)
    assert await submit(r.host, 2, text="accepted before resume") is Admission.ACCEPTED
    await r.host.idle()
    assert r.model.plans == []  # held until resume: it must run after what was left

    await r.host.resume()
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_an_event_stored_while_the_host_resumes_is_run_once_and_as_new(
    counter: TokenCounter,
) -> None:
    """An event stored just before `resume()` reads the inbox, whose intake hands it over only
    after: it is queued once, as this process's new turn, not also as one an earlier process
    left. Queued twice it would be answered twice, and its second publication, refused by the
    store, would be tried again and again while the conversation's later turns wait behind it."""
    store = open_memory_store()
    inbox = _LateHandover(store)
    r = rig(counter, ScriptedModel(), store=replace(store, inbox=inbox))
    first = asyncio.create_task(submit(r.host, 1))
    await inbox.stored.wait()
    resuming = asyncio.create_task(r.host.resume())
    await inbox.read.wait()  # item 1 is pending, its intake still on the way
    inbox.go.set()
    await resuming
    assert await first is Admission.ACCEPTED
    assert await submit(r.host, 2) is Admission.ACCEPTED

    await until(lambda: len(r.model.plans) >= 2, state=lambda: r.model.plans)
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    await r.host.idle()
    assert r.posted() == ["scripted answer", "scripted answer"]
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    assert store.tables.items[1].attempts == 0  # new: not counted as a run again after a stop
    await r.host.close(grace=0)


async def test_a_replica_runs_what_it_accepts_by_adopting_the_conversation(
    counter: TokenCounter,
) -> None:
    store = open_memory_store(shared=True)
    r = rig(counter, ScriptedModel(), store=store)
    await r.host.resume()
    assert await submit(r.host, 1) is Admission.ACCEPTED
    await r.host.idle()

    assert store.tables.items[1].owner == store.opened.owner  # adopted by this replica
    assert [p.turn_id for p in r.model.plans] == ["turn-1"]
    assert r.states() == {1: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_conversation_another_replica_owns_is_left_to_it_until_it_is_gone(
    counter: TokenCounter,
) -> None:
    store = open_memory_store(shared=True)
    owner = open_memory_store(tables=store.tables, shared=True)  # a replica with no host here
    assert owner.share is not None
    await owner.inbox.accept(request(1), source="test", marks=["event-1"])
    assert [item.item_id for item in (await owner.share.adopt(KEY)).items] == [1]
    r = rig(counter, ScriptedModel(), store=store, sweep_seconds=0)
    await r.host.resume()
    assert await submit(r.host, 2) is Admission.ACCEPTED  # stored; the owner runs it
    await r.host.idle()
    assert r.model.plans == []  # not taken: its owner is alive

    owner.die()  # its owner is gone: the next sweep takes the conversation over
    assert await r.deliverer.wait_for(2) == ["scripted answer", "scripted answer"]
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_replica_done_with_a_conversation_takes_on_what_was_accepted_meanwhile(
    counter: TokenCounter,
) -> None:
    store = open_memory_store(shared=True)
    other = open_memory_store(tables=store.tables, shared=True)
    assert other.share is not None
    r = rig(counter, ScriptedModel(gated=True), store=store)  # no sweep in this test
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()
    # Accepted by another replica while this one runs the conversation's turn: not its to adopt.
    await other.inbox.accept(request(2), source="test", marks=["event-2"])
    assert (await other.share.adopt(KEY)).items == ()

    r.model.release.set()
    await r.deliverer.wait_for(2)
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)
