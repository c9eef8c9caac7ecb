"""Approval requests on both engines, as two replicas share them: the one that posted the card is
not the one the press reaches, two presses at once decide once, and the call runs once on the
replica that took the decision."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.approvals import ApprovalDesk, ApprovalSettings
from bot.errors import ToolError
from bot.ports.approvals import Card
from bot.ports.tools import ToolSpec
from bot.turns import ConversationKind, ReplyRoute, Speaker, TurnRequest
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


class Sink:
    def __init__(self) -> None:
        self.submitted: list[tuple[TurnRequest, Sequence[str]]] = []

    async def submit(self, request: TurnRequest, *, source: str, marks: Sequence[str]) -> object:
        self.submitted.append((request, marks))
        return None


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


async def test_the_replica_that_did_not_post_the_card_decides_and_runs_it(
    engine: Engine,
) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, sinks, tool = Cards(), (Sink(), Sink()), Delete()
        poster = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        other = ApprovalDesk(second.approvals, SETTINGS, clock=engine.clock)
        poster.connect(sinks[0], {"telegram": cards}, lambda: [tool])
        other.connect(sinks[1], {"telegram": Cards()}, lambda: [tool])
        said = await poster.ask(SPEC, request(), {"text": "milk"})
        [card] = cards.posted
        answer = await other.press(card.approval_id, True, "telegram:4242")
        await other.idle()
        again = await poster.press(card.approval_id, True, "telegram:7")
        await poster.idle()
        [decided] = await first.approvals.listing()
    finally:
        await first.aclose()
        await second.aclose()
    assert "NOT run" in said.text
    assert said.outcome == "waiting_approval"
    assert answer.changed
    assert not again.changed
    assert (decided.state, decided.decided_by) == ("approved", "telegram:4242")
    assert tool.calls == [{"text": "milk"}]
    assert sinks[0].submitted == []
    [(follow, marks)] = sinks[1].submitted
    assert marks == [f"approval:{card.approval_id}"]
    assert "ran once" in follow.text
    assert "deleted" in follow.text
    assert follow.conversation_key == "telegram:42"
    assert follow.turn_id != "t1"


async def test_two_presses_at_once_on_two_replicas_decide_once(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, tool = Cards(), Delete()
        one = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        two = ApprovalDesk(second.approvals, SETTINGS, clock=engine.clock)
        one.connect(Sink(), {"telegram": cards}, lambda: [tool])
        two.connect(Sink(), {"telegram": cards}, lambda: [tool])
        await one.ask(SPEC, request(), {"text": "milk"})
        [card] = cards.posted
        answers = await asyncio.gather(
            one.press(card.approval_id, True, "telegram:4242"),
            two.press(card.approval_id, False, "telegram:7"),
        )
        await one.idle()
        await two.idle()
        [decided] = await second.approvals.listing()
    finally:
        await first.aclose()
        await second.aclose()
    assert [a.changed for a in answers].count(True) == 1
    assert tool.calls == ([{"text": "milk"}] if decided.state == "approved" else [])
    assert len(cards.closed) == 1


async def test_expiry_denies_once_across_replicas(engine: Engine) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, tool = Cards(), Delete()
        one = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        two = ApprovalDesk(second.approvals, SETTINGS, clock=engine.clock)
        sinks = Sink(), Sink()
        one.connect(sinks[0], {"telegram": cards}, lambda: [tool])
        two.connect(sinks[1], {"telegram": cards}, lambda: [tool])
        await one.ask(SPEC, request(), {"text": "milk"})
        assert await two.expire_due() == 0
        engine.clock.advance(5 * 60)
        expired = await asyncio.gather(one.expire_due(), two.expire_due())
        await one.idle()
        await two.idle()
        [card] = cards.posted
        late = await one.press(card.approval_id, True, "telegram:4242")
    finally:
        await first.aclose()
        await second.aclose()
    assert sorted(expired) == [0, 1]
    assert tool.calls == []
    assert not late.changed
    [(follow, _)] = [*sinks[0].submitted, *sinks[1].submitted]
    assert "expired" in follow.text
    assert len(cards.closed) == 1


async def test_a_call_without_approvers_or_a_card_is_refused_at_once(engine: Engine) -> None:
    store = await engine.open()
    try:
        lonely = ApprovalDesk(store.approvals, ApprovalSettings(approvers=["telegram:42"]))
        lonely.connect(Sink(), {"telegram": Cards()}, tuple)
        nowhere = ApprovalDesk(store.approvals, SETTINGS)
        nowhere.connect(Sink(), {}, tuple)
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
        lengthy.connect(Sink(), {"telegram": cards}, tuple)
        with pytest.raises(ToolError) as caught:
            await lengthy.ask(SPEC, request(), {"text": "x" * 5000})
        problems.append(str(caught.value))
        assert await store.approvals.listing() == []
    finally:
        await store.aclose()
    assert "no approver" in problems[0]
    assert "cannot show an approval card" in problems[1]
    assert "longer than" in problems[2]
    assert cards.posted == []


async def test_a_decision_whose_process_stopped_is_reported_once_and_never_rerun(
    engine: Engine,
) -> None:
    first, second = await engine.open(), await engine.open()
    try:
        cards, tool = Cards(), Delete()
        gone = ApprovalDesk(first.approvals, SETTINGS, clock=engine.clock)
        gone.connect(Sink(), {"telegram": cards}, lambda: [tool])
        await gone.ask(SPEC, request(), {"text": "milk"})
        await gone.ask(SPEC, request(), {"text": "eggs"})
        approved, denied = cards.posted
        # The process decides both, then stops before running or reporting either.
        assert await first.approvals.decide(approved.approval_id, "approved", "telegram:7", 1.0)
        assert await first.approvals.decide(denied.approval_id, "denied", "telegram:7", 1.0)
        sinks = Sink(), Sink()
        survivors = [
            ApprovalDesk(store.approvals, SETTINGS, clock=engine.clock) for store in (first, second)
        ]
        for desk, sink in zip(survivors, sinks, strict=True):
            desk.connect(sink, {"telegram": cards}, lambda: [tool])
        taken = await asyncio.gather(*(desk.recover() for desk in survivors))
        again = await survivors[0].recover()
    finally:
        await first.aclose()
        await second.aclose()
    assert sum(taken) == 2
    assert again == 0
    assert tool.calls == []  # at most once: an approved call is never run again
    notes = sorted(r.text for sink in sinks for r, _ in sink.submitted)
    assert len(notes) == 2
    assert any("whether it ran is not known" in note for note in notes)
    assert any("denied by an approver" in note for note in notes)
