"""Fast unit tests of `bot.host.Host` alone, against the doubles that ship in `bot.testing` (the
in-memory store, a scripted model, a recording outbox deliverer): intake, ordering, refusals,
model failure and shutdown, with no database, no HTTP and no model server. Tests wait on events
and conditions, never on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot import replies
from bot.errors import PartDelayed, TurnFailed, TurnSpend
from bot.ports.intake import Admission
from bot.ports.model import TurnOutcome, TurnPlan
from bot.ports.outbox import InboxState, OutboxPart, Publication
from bot.prompt import TokenCounter
from bot.testing.model import ScriptedModel, answer
from bot.turns import Outcome, ToolResultBlock, ToolUseBlock
from tests.host.rig import KEY, ROUTE, Rig, rig, submit


@pytest.fixture
async def started(counter: TokenCounter) -> AsyncIterator[Rig]:
    r = rig(counter, ScriptedModel(answer("scripted answer")))
    await r.host.resume()
    yield r
    await r.host.close(grace=0)


async def test_submitted_request_is_answered_once_through_the_deliverer(started: Rig) -> None:
    assert await submit(started.host, 1) is Admission.ACCEPTED
    await started.host.idle()

    assert [(p.route, p.text) for p in started.deliverer.posted] == [(ROUTE, "scripted answer")]
    assert [p.turn_id for p in started.model.plans] == ["turn-1"]
    assert started.states() == {1: InboxState.ANSWERED}
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
    assert second.history[1].text == "scripted answer"
    assert len(await started.store.history.load(KEY)) == 4
    assert started.posted() == ["scripted answer", "scripted answer"]


async def test_every_entry_is_stored_with_its_token_estimate(started: Rig) -> None:
    """The model's entries come without an estimate: the turn counts them once, before they are
    stored, so later turns trim the history without counting it again."""
    assert await submit(started.host, 1, text="first") is Admission.ACCEPTED
    await started.host.idle()

    stored = await started.store.history.load(KEY)
    assert [entry.role for entry in stored] == ["user", "assistant"]
    assert all(entry.tokens > 0 for entry in stored)


async def test_at_capacity_the_person_is_told_the_host_is_busy(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel(gated=True), queue_per_conversation=1)
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
    assert r.states()[3] is InboxState.REFUSED
    await r.host.close(grace=0)


async def test_a_model_failure_publishes_the_failure_reply_and_its_record(
    counter: TokenCounter,
) -> None:
    failure = TurnFailed("overloaded after 3 tries", spend=TurnSpend(attempts=3))
    r = rig(counter, ScriptedModel(failure))
    await r.host.resume()
    assert await submit(r.host, 1, text="will it fail") is Admission.ACCEPTED
    await r.host.idle()

    assert r.posted() == [replies.TURN_FAILED]
    (publication,) = r.store.outbox.publications
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
    r = rig(counter, ScriptedModel(failure))
    await r.host.resume()
    await submit(r.host, 1)
    await r.host.idle()

    assert r.posted() == ["I can't help with that one."]
    await r.host.close(grace=0)


async def test_close_stops_intake_and_lets_the_running_turn_finish(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel(gated=True))
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

    assert r.posted() == ["scripted answer"]
    assert [p.turn_id for p in r.model.plans] == ["turn-1"]
    assert r.states() == {1: InboxState.ANSWERED}  # the refused event was never stored


async def test_an_answer_goes_out_part_by_part_in_order(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel(answer("one two three")))
    r.deliverer.split = 4  # "one ", "two ", "thre", "e"
    await r.host.resume()
    await submit(r.host, 1)
    await r.host.idle()

    assert r.posted() == ["one ", "two ", "thre", "e"]
    parts = await r.store.outbox.parts("turn-1")
    assert [p.platform_id for p in parts] == ["test-1", "test-2", "test-3", "test-4"]
    assert await r.store.outbox.undelivered() == []
    await r.host.close(grace=0)


async def test_a_part_the_platform_refuses_is_abandoned_and_later_turns_go_out(
    counter: TokenCounter,
) -> None:
    r = rig(counter, ScriptedModel(answer("first"), answer("second")))
    r.deliverer.refuse = {"turn-1.0"}
    await r.host.resume()
    await submit(r.host, 1)
    await submit(r.host, 2)
    await r.host.idle()

    assert r.posted() == ["second"]
    assert await r.store.outbox.undelivered() == []  # refused for good: not posted again
    (refused,) = await r.store.outbox.parts("turn-1")
    assert refused.platform_id is None
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_part_the_platform_did_not_take_yet_is_tried_again_and_posted_once(
    counter: TokenCounter,
) -> None:
    r = rig(counter, ScriptedModel())
    r.deliverer.failures = [PartDelayed("rate limited", retry_after=0)]
    await r.host.resume()
    await submit(r.host, 1)
    await r.host.idle()

    assert r.posted() == ["scripted answer"]
    assert r.deliverer.failures == []  # the first try met the failure
    await r.host.close(grace=0)


async def test_parts_a_crashed_process_left_are_looked_for_before_they_are_posted(
    counter: TokenCounter,
) -> None:
    r = rig(counter, ScriptedModel())
    parts = [OutboxPart(f"turn-9.{n}", "turn-9", KEY, n, ROUTE, f"part {n}") for n in range(2)]
    await r.store.outbox.publish(Publication(KEY, parts=parts))
    r.deliverer.platform["turn-9.0"] = "test-earlier"  # it went through before the crash

    await r.host.resume()
    await r.host.idle()

    assert r.posted() == ["part 1"]  # part 0 was found on the platform, not posted twice
    assert [p.part_id for p in r.deliverer.finished] == ["turn-9.0"]
    stored = await r.store.outbox.parts("turn-9")
    assert [p.platform_id for p in stored] == ["test-earlier", "test-1"]
    await r.host.close(grace=0)


class _CrashesAfterACall(ScriptedModel):
    """Reports one tool call that ran, then fails in a way the host does not expect."""

    async def run(self, plan: TurnPlan) -> TurnOutcome:
        self.plans.append(plan)
        assert plan.on_tool is not None
        plan.on_tool(ToolUseBlock("toolu_1", "tickets__create", {"title": "printer"}))
        plan.on_tool(ToolResultBlock("toolu_1", "created TICKET-7"))
        plan.on_tool(ToolUseBlock("toolu_2", "tickets__assign", {"to": "bob"}))  # cut short
        raise RuntimeError("a bug in the host")


async def test_a_turn_that_crashes_after_a_call_keeps_the_call_in_its_account(
    counter: TokenCounter,
) -> None:
    r = rig(counter, _CrashesAfterACall())
    await r.host.resume()
    await submit(r.host, 1, text="open a ticket")
    await r.host.idle()

    (publication,) = r.store.outbox.publications
    assert publication.state is InboxState.CRASHED
    note = publication.entries[1].text
    assert "did not complete (the host failed)" in note
    assert '1. tickets__create {"title": "printer"} -> ok: created TICKET-7' in note
    assert "2. tickets__assign" in note
    assert "whether it took effect is not known" in note
    assert "a bug in the host" not in note
    await r.host.close(grace=0)
