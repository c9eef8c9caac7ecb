"""Fast unit tests of `bot.host.Host` alone, against the in-memory port doubles of
`tests/host/doubles.py`: intake, ordering, refusals, model failure and shutdown, with no store,
no HTTP and no model server. Tests wait on events and conditions, never on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot import replies
from bot.errors import TurnFailed
from bot.inbox import InboxState
from bot.ports.intake import Admission
from bot.prompt import TokenCounter
from bot.turns import Outcome
from tests.host.doubles import CannedModel
from tests.host.rig import KEY, ROUTE, Rig, rig, submit


@pytest.fixture
async def started(counter: TokenCounter) -> AsyncIterator[Rig]:
    r = rig(counter, CannedModel())
    await r.host.resume()
    yield r
    await r.host.close(grace=0)


async def test_submitted_request_is_answered_once_through_the_deliverer(started: Rig) -> None:
    assert await submit(started.host, 1) is Admission.ACCEPTED
    await started.host.idle()

    assert started.deliverer.posted == [(ROUTE, "canned answer")]
    assert [p.turn_id for p in started.model.plans] == ["turn-1"]
    assert started.inbox.states == {1: InboxState.ANSWERED}
    assert [r.outcome for r in started.records] == [Outcome.OK]


async def test_a_redelivered_event_is_not_answered_twice(started: Rig) -> None:
    assert await submit(started.host, 1) is Admission.ACCEPTED
    assert await submit(started.host, 1) is Admission.DUPLICATE
    await started.host.idle()

    assert len(started.deliverer.posted) == 1
    assert len(started.model.plans) == 1


async def test_two_requests_of_one_conversation_run_in_order(started: Rig) -> None:
    assert await submit(started.host, 1, text="first") is Admission.ACCEPTED
    assert await submit(started.host, 2, text="second") is Admission.ACCEPTED
    await started.host.idle()

    first, second = started.model.plans
    assert (first.turn_id, second.turn_id) == ("turn-1", "turn-2")
    # The second turn saw the first one published: it ran after it, not beside it.
    assert first.history == []
    assert len(second.history) == 2  # turn 1's request and answer
    assert "first" in second.history[0].text
    assert second.history[1].text == "canned answer"
    assert len(started.history.entries[KEY]) == 4
    assert [t for _, t in started.deliverer.posted] == ["canned answer", "canned answer"]


async def test_at_capacity_the_person_is_told_the_host_is_busy(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel(gated=True), queue_per_conversation=1)
    await r.host.resume()
    assert await submit(r.host, 1) is Admission.ACCEPTED
    await r.model.started.wait()  # turn 1 is in the model; its lane holds nothing else
    assert await submit(r.host, 2) is Admission.ACCEPTED  # waits behind it: the lane is full
    assert await submit(r.host, 3) is Admission.BUSY

    assert await r.deliverer.wait_for(1) == [replies.BUSY]  # told now, not after turn 1
    r.model.release.set()
    await r.host.idle()

    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2"]
    busy = [rec for rec in r.records if rec.turn_id == "turn-3"]
    assert [(rec.outcome, rec.error) for rec in busy] == [(Outcome.REFUSED, "busy")]
    assert r.inbox.states[3] is InboxState.REFUSED
    await r.host.close(grace=0)


async def test_a_model_failure_publishes_the_failure_reply_and_its_record(
    counter: TokenCounter,
) -> None:
    r = rig(counter, CannedModel(error=TurnFailed("overloaded after 3 tries", attempts=3)))
    await r.host.resume()
    assert await submit(r.host, 1, text="will it fail") is Admission.ACCEPTED
    await r.host.idle()

    assert [t for _, t in r.deliverer.posted] == [replies.TURN_FAILED]
    (publication,) = r.outbox.publications
    assert publication.state is InboxState.FAILED
    assert publication.record is not None
    assert publication.record.outcome is Outcome.FAILED
    assert publication.record.error == "overloaded after 3 tries"
    assert publication.record.attempts == 3
    # The continuity account: the request, then the host's note that the turn did not complete.
    assert "will it fail" in publication.entries[0].text
    assert "did not complete" in publication.entries[1].text
    assert [rec.outcome for rec in r.records] == [Outcome.FAILED]
    await r.host.close(grace=0)


async def test_a_failure_with_its_own_reply_says_that_reply(counter: TokenCounter) -> None:
    failure = TurnFailed("refused by policy", reply="I can't help with that one.")
    r = rig(counter, CannedModel(error=failure))
    await r.host.resume()
    await submit(r.host, 1)
    await r.host.idle()

    assert [t for _, t in r.deliverer.posted] == ["I can't help with that one."]
    await r.host.close(grace=0)


async def test_close_stops_intake_and_lets_the_running_turn_finish(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel(gated=True))
    await r.host.resume()
    assert await submit(r.host, 1) is Admission.ACCEPTED
    await r.model.started.wait()

    closing = asyncio.create_task(r.host.close(grace=60))
    while not r.host.draining:  # close() has begun (a condition, not a time)
        await asyncio.sleep(0)
    assert await submit(r.host, 2) is Admission.CLOSED
    assert not closing.done()  # it waits for the running turn

    r.model.release.set()
    await closing

    assert [t for _, t in r.deliverer.posted] == ["canned answer"]
    assert [p.turn_id for p in r.model.plans] == ["turn-1"]
    assert [i.item_id for i in r.inbox.items] == [1]  # the refused event was never stored
    assert r.inbox.states == {1: InboxState.ANSWERED}
