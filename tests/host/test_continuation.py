"""A turn that suspends (a tool call waits for an approval) and continues later, in its
conversation's order, through the in-memory doubles (DESIGN §3)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from bot import replies
from bot.ports.intake import Admission
from bot.ports.model import TurnOutcome
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.turns import Continuation, HistoryEntry, Outcome, TextBlock, TurnRequest
from tests.host.doubles import CannedModel, RecordingResumer
from tests.host.rig import Rig, request, rig, submit

APPROVAL = Continuation("approval", "appr-1")


def said(text: str, suspended: tuple[Continuation, ...] = ()) -> TurnOutcome:
    entry = HistoryEntry("assistant", (TextBlock(text),), at=datetime.now(UTC))
    return TurnOutcome(text=text, entries=(entry,), suspended=suspended)


def continuation(of: TurnRequest, turn_id: str, kind: str = "approval") -> TurnRequest:
    """The continuation request its owner submits once the suspension is decided."""
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
    waiting = said("I asked an admin to approve the deploy.", suspended=(APPROVAL,))
    r = rig(counter, CannedModel(waiting), resumers={"approval": resumer})
    await r.host.resume()
    assert await submit(r.host, 1, text="deploy it") is Admission.ACCEPTED
    await r.host.idle()

    # Suspended: answered and published like any turn, its record says what it waits on.
    assert await r.deliverer.wait_for(1) == ["I asked an admin to approve the deploy."]
    (suspended,) = r.records
    assert suspended.outcome is Outcome.SUSPENDED
    assert suspended.details["suspended"] == [{"kind": "approval", "key": "appr-1"}]
    assert r.inbox.states == {1: InboxState.ANSWERED}
    assert resumer.resumed == []

    r.model.outcome = said("The deploy ran: it returned 42.")
    assert await go_on(r, request(1), "turn-1.c") is Admission.ACCEPTED
    assert await go_on(r, request(1), "turn-1.c") is Admission.DUPLICATE  # e.g. by recovery
    await r.host.idle()

    (resumed,) = resumer.resumed
    assert resumed[1] == APPROVAL
    assert resumed[0].turn_id == "turn-1.c"
    # The model read the resumer's note as the continuation's text, after the first turn.
    second = r.model.plans[1]
    assert [entry.text for entry in second.history][-1] == "I asked an admin to approve the deploy."
    assert resumer.note in r.history.entries[r.records[0].conversation_key][2].text
    assert [text for _, text in r.deliverer.posted][1] == "The deploy ran: it returned 42."
    assert [rec.outcome for rec in r.records] == [Outcome.SUSPENDED, Outcome.OK]
    assert r.inbox.states == {1: InboxState.ANSWERED, 2: InboxState.ANSWERED}
    await r.host.close(grace=0)


async def test_a_continuation_waits_for_the_turn_running_in_its_conversation(
    counter: TokenCounter,
) -> None:
    resumer = RecordingResumer()
    r = rig(counter, CannedModel(gated=True), resumers={"approval": resumer})
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()  # turn 1 is in the model call
    assert await go_on(r, request(1), "turn-1.c") is Admission.ACCEPTED
    assert resumer.resumed == []  # queued behind turn 1 on its lane, not run beside it

    r.model.release.set()
    await r.host.idle()
    assert [turn.turn_id for turn, _ in resumer.resumed] == ["turn-1.c"]
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-1.c"]
    await r.host.close(grace=0)


async def test_a_continuation_of_an_unknown_kind_fails_clearly(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel())
    await r.host.resume()
    assert await go_on(r, request(1), "turn-1.c", kind="payment") is Admission.ACCEPTED
    await r.host.idle()

    assert r.model.plans == []
    (record,) = r.records
    assert record.outcome is Outcome.FAILED
    assert "'payment'" in str(record.error)
    assert [text for _, text in r.deliverer.posted] == [replies.TURN_FAILED]
    assert r.inbox.states == {1: InboxState.FAILED}
    await r.host.close(grace=0)


async def test_a_continuation_is_never_refused_for_the_rate_or_a_full_lane(
    counter: TokenCounter,
) -> None:
    resumer = RecordingResumer()
    r = rig(
        counter,
        CannedModel(gated=True),
        resumers={"approval": resumer},
        turns_per_person_per_minute=1,
        queue_per_conversation=1,
    )
    await r.host.resume()
    await submit(r.host, 1)
    await r.model.started.wait()
    assert await submit(r.host, 2) is Admission.ACCEPTED  # the lane is full now
    # Person 1 is over the rate and the lane is full, yet the decided continuation is taken.
    assert await go_on(r, request(1), "turn-1.c") is Admission.ACCEPTED

    r.model.release.set()
    await r.host.idle()
    assert [p.turn_id for p in r.model.plans] == ["turn-1", "turn-2", "turn-1.c"]
    await r.host.close(grace=0)
