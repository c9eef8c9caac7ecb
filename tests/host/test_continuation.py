"""The host's side of suspended turns (DESIGN §3), through the doubles of `bot.testing`: a turn
whose tools suspended it is answered and recorded as suspended; its continuation is given to its
kind's Resumer inside the conversation's lane (after what was queued before it), the note the
Resumer returns is what the model reads, and it is never refused for the person's rate or a full
lane; a continuation of an unknown kind fails clearly and calls no model."""

from __future__ import annotations

from dataclasses import replace

from bot import replies
from bot.model.wire import encode
from bot.ports.intake import Admission
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.testing.model import ScriptedModel, answer
from bot.testing.resumer import RecordingResumer
from bot.turns import Continuation, Outcome, TurnRequest
from tests.host.rig import KEY, Rig, request, rig, submit

APPROVAL = Continuation("approval", "appr-1")


def continuation(of: TurnRequest, turn_id: str, kind: str = "approval") -> TurnRequest:
    """The continuation request its owner submits once the suspension is decided: the suspended
    turn's request, with no words of its own."""
    return replace(
        of,
        turn_id=turn_id,
        text="",
        preceding=(),
        attachments=(),
        speaker=None,
        continues=Continuation(kind, APPROVAL.key),
    )


async def go_on(r: Rig, of: TurnRequest, turn_id: str, kind: str = "approval") -> Admission:
    marks = [f"approval:{APPROVAL.key}"]
    return await r.host.submit(continuation(of, turn_id, kind), source="approval", marks=marks)


async def test_a_suspended_turn_is_answered_and_continues_with_the_resumers_note(
    counter: TokenCounter,
) -> None:
    resumer = RecordingResumer()
    asked = "I asked an admin to approve the deploy."
    waiting = replace(answer(asked), suspended=(APPROVAL,))
    model = ScriptedModel(waiting, answer("The deploy ran: it returned 42."))
    r = rig(counter, model, resumers={"approval": resumer})
    await r.host.resume()
    assert await submit(r.host, 1, text="deploy it") is Admission.ACCEPTED
    await r.host.idle()

    # Suspended: answered and published like any turn, its record says what it waits on.
    assert r.posted() == [asked]
    (suspended,) = r.records
    assert suspended.outcome is Outcome.SUSPENDED
    assert suspended.details["suspended"] == [{"kind": "approval", "key": "appr-1"}]
    assert r.states() == {1: InboxState.ANSWERED}
    assert [entry.text for entry in await r.store.history.load(KEY)][-1] == asked
    assert resumer.resumed == []

    assert await go_on(r, request(1), "turn-1.c") is Admission.ACCEPTED
    assert await go_on(r, request(1), "turn-1.c") is Admission.DUPLICATE  # e.g. by recovery
    await r.host.idle()

    ((resumed, continues),) = resumer.resumed
    assert (resumed.turn_id, continues) == ("turn-1.c", APPROVAL)
    # The model read the resumer's note as the continuation's text, after the first turn.
    second = r.model.plans[1]
    assert [entry.text for entry in second.history][-1] == asked
    assert resumer.note in (await r.store.history.load(KEY))[2].text
    assert r.posted() == [asked, "The deploy ran: it returned 42."]
    assert [rec.outcome for rec in r.records] == [Outcome.SUSPENDED, Outcome.OK]
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_continuation_waits_for_the_turn_running_in_its_conversation(
    counter: TokenCounter,
) -> None:
    resumer = RecordingResumer("[Host note] appr-1 was decided")
    r = rig(counter, ScriptedModel(gated=True), resumers={"approval": resumer})
    await r.host.resume()
    await submit(r.host, 1)
    await submit(r.host, 2)
    await r.model.started.wait()  # turn 1 is in the model call, turn 2 waits behind it
    assert await go_on(r, request(1), "turn-1.c") is Admission.ACCEPTED
    assert resumer.resumed == []  # queued behind turns 1 and 2 on its lane, not run beside them

    r.model.release.set()
    await r.host.idle()
    assert [turn.turn_id for turn, _ in resumer.resumed] == ["turn-1.c"]
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2", "turn-1.c"]
    continued = r.model.plans[2]
    assert len(continued.history) == 4  # turns 1 and 2, published before it ran
    built = continued.builder.build(continued.prompt, continued.history)
    user = encode(built.request)["messages"][-1]
    assert "[Host note] appr-1 was decided" in str(user["content"])
    await r.host.close(grace=0)


async def test_a_continuation_is_never_refused_for_the_rate_or_a_full_lane(
    counter: TokenCounter,
) -> None:
    resumer = RecordingResumer()
    r = rig(
        counter,
        ScriptedModel(gated=True),
        resumers={"approval": resumer},
        turns_per_person_per_minute=1,
        queue_per_conversation=1,
    )
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()
    assert await submit(r.host, 2) is Admission.ACCEPTED  # the lane is full now
    assert await submit(r.host, 3) is Admission.BUSY  # as a new turn would be told
    # Person 1 is over the rate and the lane is full, yet the decided continuation is taken.
    assert await go_on(r, request(1), "turn-1.c") is Admission.ACCEPTED

    r.model.release.set()
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2", "turn-1.c"]
    assert r.states() == {
        1: InboxState.ANSWERED,
        2: InboxState.ANSWERED,
        3: InboxState.REFUSED,
        4: InboxState.ANSWERED,
    }
    await r.host.close(grace=0)


async def test_a_continuation_of_an_unknown_kind_fails_clearly_without_a_model_call(
    counter: TokenCounter,
) -> None:
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    assert await go_on(r, request(1), "turn-1.c", kind="payment") is Admission.ACCEPTED
    await r.host.idle()

    assert r.model.plans == []
    (record,) = r.records
    assert record.outcome is Outcome.FAILED
    assert record.error == "no resumer for 'payment' continuations"
    assert r.posted() == [replies.TURN_FAILED]
    assert r.states() == {1: InboxState.FAILED}
    await r.host.close(grace=0)
