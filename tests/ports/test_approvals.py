"""Approval requests on both engines, as two replicas share them: the one that posted the card is
not the one the press reaches, two presses at once decide once, a decision runs nothing and
submits its continuation once, and the continuation (on whichever replica its lane runs) runs an
approved call at most once: again after a crash it tells what it kept, and after a stop during
the call it says it is not known whether it ran."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from bot import replies
from bot.errors import ToolError
from bot.ports.approvals import Card
from bot.ports.intake import Admission
from bot.ports.stores import OpenStore
from bot.ports.tools import ToolSpec
from bot.tools.approvals import ApprovalDesk, ApprovalSettings
from bot.turns import Continuation, ConversationKind, ReplyRoute, Speaker, TurnRequest
from tests.engines import Engine

pytestmark = pytest.mark.all_engines

SPEC = ToolSpec("notes__delete", "Delete notes.", {"type": "object"})
SETTINGS = ApprovalSettings(approvers=["telegram:4242", "telegram:7"], expire_minutes=5)


class Cards:
    """The channel side, recorded: where each card went and how it was closed."""

    name = "telegram"

    def __init__(self) -> None:
        self.posted: list[Card] = []
        self.closed: list[str] = []

    def use_approvals(self, desk: Any) -> None:
        pass

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        self.posted.append(card)
        return {"chat_id": 42, "message_id": len(self.posted)}

    async def close_card(self, where: dict[str, Any], text: str) -> None:
        self.closed.append(text)


class Unpostable(Cards):
    """A channel that cannot post the card (the platform refused it)."""

    async def post_card(self, route: ReplyRoute, card: Card) -> dict[str, Any]:
        raise OSError("the platform refused the card")


class Intake:
    """The host's intake as the desk sees it, over the store's real inbox: a continuation is
    stored once, however often (and on whichever replica) it is submitted."""

    def __init__(self, store: OpenStore) -> None:
        self._inbox = store.inbox
        self.accepted: list[tuple[TurnRequest, Sequence[str]]] = []

    async def submit(self, request: TurnRequest, *, source: str, marks: Sequence[str]) -> Admission:
        if await self._inbox.accept(request, source=source, marks=marks) is None:
            return Admission.DUPLICATE
        self.accepted.append((request, marks))
        return Admission.ACCEPTED


class Delete:
    """The tool as the hub offers it: it counts the calls that reach it."""

    spec = SPEC

    def __init__(self) -> None:
        self.calls: list[Mapping[str, Any]] = []

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        self.calls.append(dict(arguments))
        return "deleted"


def request() -> TurnRequest:
    return TurnRequest(
        conversation_key="telegram:42",
        kind=ConversationKind.PUSH,
        channel="telegram",
        text="delete the milk note",
        received_at=datetime.now(UTC),
        turn_id="t1",
        speaker=Speaker("Alice Chen", "alice"),
        route=ReplyRoute("telegram", {"chat_id": 42}),
        person="telegram:42",
    )


async def test_the_replica_that_did_not_post_the_card_decides_and_either_runs_it(
    engine: Engine,
) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, intakes, tool = Cards(), (Intake(first), Intake(second)), Delete()
        poster = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        other = ApprovalDesk(second.approvals, SETTINGS, clock=engine.clock)
        poster.connect(intakes[0], {"telegram": cards}, lambda: [tool])
        other.connect(intakes[1], {"telegram": cards}, lambda: [tool])
        said = await poster.ask(SPEC, request(), {"text": "milk"})
        [card] = cards.posted
        answer = await other.press(card.approval_id, True, "telegram:4242")
        ran_at_decision = list(tool.calls)
        again = await poster.press(card.approval_id, True, "telegram:7")
        recovered = await poster.recover()  # submitted already: recognised by its mark
        [(follow, marks)] = intakes[1].accepted
        assert follow.continues is not None
        # The lane runs it on either replica; a run again (a crash before its turn was
        # published) tells the model what the first run kept, and never calls again.
        note = await poster.resume(follow, follow.continues)
        rerun = await other.resume(follow, follow.continues)
        [decided] = await first.approvals.listing()
    finally:
        await first.aclose()
        await second.aclose()
    assert "NOT run" in said.text
    assert said.outcome == "waiting_approval"
    assert said.suspends == Continuation("approval", card.approval_id)
    assert answer.changed
    assert not again.changed
    assert ran_at_decision == []
    assert recovered == 0
    assert intakes[0].accepted == []
    assert marks == [f"approval:{card.approval_id}"]
    assert follow.continues == Continuation("approval", card.approval_id)
    assert (follow.text, follow.speaker, follow.preceding) == ("", None, ())
    assert (follow.conversation_key, follow.route) == ("telegram:42", request().route)
    assert follow.turn_id != "t1"
    assert (decided.state, decided.decided_by) == ("approved", "telegram:4242")
    assert tool.calls == [{"text": "milk"}]
    assert "at most once" in note
    assert "deleted" in note
    assert rerun == note
    assert decided.result == "deleted"
    assert len(cards.closed) == 1


async def test_two_presses_at_once_on_two_replicas_decide_once(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, intakes, tool = Cards(), (Intake(first), Intake(second)), Delete()
        one = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        two = ApprovalDesk(second.approvals, SETTINGS, clock=engine.clock)
        one.connect(intakes[0], {"telegram": cards}, lambda: [tool])
        two.connect(intakes[1], {"telegram": cards}, lambda: [tool])
        await one.ask(SPEC, request(), {"text": "milk"})
        [card] = cards.posted
        answers = await asyncio.gather(
            one.press(card.approval_id, True, "telegram:4242"),
            two.press(card.approval_id, False, "telegram:7"),
        )
        [decided] = await second.approvals.listing()
    finally:
        await first.aclose()
        await second.aclose()
    assert [a.changed for a in answers].count(True) == 1
    assert tool.calls == []  # a decision runs nothing: the continuation does
    assert len([*intakes[0].accepted, *intakes[1].accepted]) == 1
    assert decided.state in ("approved", "denied")
    assert len(cards.closed) == 1


async def test_expiry_denies_once_across_replicas(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, tool = Cards(), Delete()
        one = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        two = ApprovalDesk(second.approvals, SETTINGS, clock=engine.clock)
        intakes = Intake(first), Intake(second)
        one.connect(intakes[0], {"telegram": cards}, lambda: [tool])
        two.connect(intakes[1], {"telegram": cards}, lambda: [tool])
        await one.ask(SPEC, request(), {"text": "milk"})
        assert await two.expire_due() == 0
        engine.clock.advance(5 * 60)
        expired = await asyncio.gather(one.expire_due(), two.expire_due())
        [card] = cards.posted
        late = await one.press(card.approval_id, True, "telegram:4242")
        [(follow, _)] = [*intakes[0].accepted, *intakes[1].accepted]
        assert follow.continues is not None
        note = await two.resume(follow, follow.continues)
    finally:
        await first.aclose()
        await second.aclose()
    assert sorted(expired) == [0, 1]
    assert not late.changed
    assert "expired" in note
    assert "did NOT run" in note
    assert tool.calls == []
    [closed] = cards.closed
    assert "expired" in closed


async def test_a_call_without_approvers_or_a_card_is_refused_at_once(engine: Engine) -> None:
    store = await engine.open()
    try:
        lonely = ApprovalDesk(store.approvals, ApprovalSettings(approvers=["telegram:42"]))
        lonely.connect(Intake(store), {"telegram": Cards()}, tuple)
        nowhere = ApprovalDesk(store.approvals, SETTINGS)
        nowhere.connect(Intake(store), {}, tuple)
        problems = []
        for desk, arguments in (
            (lonely, {"text": "milk"}),  # the only approver is the requester
            (nowhere, {"text": "milk"}),  # no channel shows cards
        ):
            with pytest.raises(ToolError) as caught:
                await desk.ask(SPEC, request(), arguments)
            problems.append(str(caught.value))
        cards = Cards()
        lengthy = ApprovalDesk(store.approvals, SETTINGS)
        lengthy.connect(Intake(store), {"telegram": cards}, tuple)
        with pytest.raises(ToolError) as caught:
            await lengthy.ask(SPEC, request(), {"text": "x" * 5000})
        problems.append(str(caught.value))
        assert await store.approvals.listing() == []
        # A card the channel could not post is denied at once; its turn knows, so nothing is
        # left for recovery to continue.
        broken, intake = ApprovalDesk(store.approvals, SETTINGS), Intake(store)
        broken.connect(intake, {"telegram": Unpostable()}, tuple)
        with pytest.raises(ToolError) as caught:
            await broken.ask(SPEC, request(), {"text": "milk"})
        problems.append(str(caught.value))
        recovered = await broken.recover()
    finally:
        await store.aclose()
    assert "no approver" in problems[0]
    assert "cannot show an approval card" in problems[1]
    assert "longer than" in problems[2]
    assert "cannot show an approval card" in problems[3]
    assert cards.posted == []
    assert recovered == 0
    assert intake.accepted == []


async def test_decisions_whose_process_stopped_continue_once_and_never_run_again(
    engine: Engine,
) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, tool = Cards(), Delete()
        gone = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        gone.connect(Intake(first), {"telegram": cards}, lambda: [tool])
        await gone.ask(SPEC, request(), {"text": "milk"})
        await gone.ask(SPEC, request(), {"text": "eggs"})
        approved, denied = cards.posted
        # The process decides both, then stops before closing their cards or submitting their
        # continuations.
        now = engine.clock()
        assert await first.approvals.decide(approved.approval_id, "approved", "telegram:7", now)
        assert await first.approvals.decide(denied.approval_id, "denied", "telegram:7", now)
        intakes = Intake(first), Intake(second)
        survivors = [
            ApprovalDesk(store.approvals, SETTINGS, clock=engine.clock) for store in (first, second)
        ]
        for desk, intake in zip(survivors, intakes, strict=True):
            desk.connect(intake, {"telegram": cards}, lambda: [tool])
        taken = await asyncio.gather(*(desk.recover() for desk in survivors))
        again = await survivors[0].recover()
        follows = {r.continues.key: r for i in intakes for r, _ in i.accepted if r.continues}
        # The approved one's continuation began its call, and its process stopped midway.
        assert await first.approvals.start(approved.approval_id, engine.clock())
        assert not await second.approvals.start(approved.approval_id, engine.clock())
        unknown = await survivors[1].resume(
            follows[approved.approval_id], Continuation("approval", approved.approval_id)
        )
        refused = await survivors[0].resume(
            follows[denied.approval_id], Continuation("approval", denied.approval_id)
        )
        left = await first.approvals.unfinished(0.0)
        lost = await survivors[0].resume(request(), Continuation("approval", "A" * 24))
    finally:
        await first.aclose()
        await second.aclose()
    assert sum(taken) == 2
    assert again == 0
    assert sorted(follows) == sorted([approved.approval_id, denied.approval_id])
    assert len(cards.closed) == 2  # the survivors closed the cards the stopped process left
    assert tool.calls == []  # at most once: a call marked running is never run again
    assert "whether it ran is not known" in unknown
    assert "denied by an approver" in refused
    assert left == []  # both continuations kept their outcome: recovery has nothing left
    assert lost == replies.APPROVAL_LOST


async def test_a_turn_that_runs_again_after_a_crash_asks_once(engine: Engine) -> None:
    store = await engine.open()
    try:
        cards = Cards()
        desk = ApprovalDesk(store.approvals, SETTINGS, clock=engine.clock)
        desk.connect(Intake(store), {"telegram": cards}, tuple)
        first = await desk.ask(SPEC, request(), {"text": "milk"})
        # The process stopped before the asking turn was published; it runs again and the
        # model makes the same call: the card it showed stands, no second one is posted.
        again = await desk.ask(SPEC, request(), {"text": "milk"})
        other = await desk.ask(SPEC, request(), {"text": "eggs"})
        listed = await store.approvals.listing()
    finally:
        await store.aclose()
    assert again.suspends == first.suspends
    assert other.suspends != first.suspends
    assert len(cards.posted) == 2
    assert len(listed) == 2


async def test_cards_are_bounded_per_turn_and_per_conversation_on_every_engine(
    engine: Engine,
) -> None:
    store = await engine.open()
    try:
        cards, tool = Cards(), Delete()
        settings = SETTINGS.model_copy(
            update={"max_pending_per_turn": 2, "max_pending_per_conversation": 3}
        )
        desk = ApprovalDesk(store.approvals, settings, clock=engine.clock)
        desk.connect(Intake(store), {"telegram": cards}, lambda: [tool])
        first, second = request(), replace(request(), turn_id="t2")
        for word in ("milk", "eggs"):
            await desk.ask(SPEC, first, {"text": word})
        with pytest.raises(ToolError, match="this turn already has 2"):
            await desk.ask(SPEC, first, {"text": "tea"})
        await desk.ask(SPEC, second, {"text": "jam"})
        with pytest.raises(ToolError, match="this conversation already has 3"):
            await desk.ask(SPEC, second, {"text": "tea"})
        await desk.press(cards.posted[0].approval_id, False, "telegram:4242")
        await desk.ask(SPEC, second, {"text": "tea"})  # one was decided: room for one more
    finally:
        await store.aclose()
    assert len(cards.posted) == 4
    assert tool.calls == []
