"""Where turns come from (`bot.host.work`): one process resuming what an earlier one left, and a
replica adopting conversations on a shared store, through the in-memory doubles."""

from __future__ import annotations

from bot.ports.intake import Admission
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from tests.host.doubles import CannedModel, MemoryInbox, MemoryShare
from tests.host.rig import request, rig, submit


async def test_on_resume_what_an_earlier_process_left_runs_before_what_came_since(
    counter: TokenCounter,
) -> None:
    earlier = MemoryInbox()
    await earlier.accept(request(1, text="left pending"), source="test", marks=["event-1"])
    r = rig(counter, CannedModel(), inbox=earlier)
    assert await submit(r.host, 2, text="accepted before resume") is Admission.ACCEPTED
    await r.host.idle()
    assert r.model.plans == []  # held until resume: it must run after what was left

    await r.host.resume()
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    assert r.inbox.states == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_replica_runs_what_it_accepts_by_adopting_the_conversation(
    counter: TokenCounter,
) -> None:
    inbox = MemoryInbox()
    share = MemoryShare(inbox)
    r = rig(counter, CannedModel(), inbox=inbox, share=share)
    await r.host.resume()
    assert await submit(r.host, 1) is Admission.ACCEPTED
    await r.host.idle()

    assert share.adopted == {1}
    assert [p.turn_id for p in r.model.plans] == ["turn-1"]
    await r.host.close(grace=0)


async def test_a_conversation_another_replica_owns_is_left_to_it_until_it_is_gone(
    counter: TokenCounter,
) -> None:
    inbox = MemoryInbox()
    share = MemoryShare(inbox)
    share.elsewhere.add(request(1).conversation_key)
    r = rig(counter, CannedModel(), inbox=inbox, share=share, sweep_seconds=0)
    await r.host.resume()
    assert await submit(r.host, 1) is Admission.ACCEPTED  # stored; the owner runs it
    assert r.model.plans == []

    share.elsewhere.clear()  # its owner died: the next sweep takes the conversation over
    assert await r.deliverer.wait_for(1) == ["canned answer"]
    await r.host.idle()
    assert r.inbox.states == {1: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_replica_done_with_a_conversation_takes_on_what_was_accepted_meanwhile(
    counter: TokenCounter,
) -> None:
    inbox = MemoryInbox()
    share = MemoryShare(inbox)
    r = rig(counter, CannedModel(gated=True), inbox=inbox, share=share)  # no sweep in this test
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()
    # Accepted by another replica while this one runs the conversation's turn.
    await inbox.accept(request(2), source="test", marks=["event-2"])

    r.model.release.set()
    await r.deliverer.wait_for(2)
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    await r.host.close(grace=0)
