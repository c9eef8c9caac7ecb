"""The host's side of suspended turns (DESIGN §3), against the in-memory port doubles: a turn
whose tools suspended it is answered and recorded as suspended; a continuation is given to its
kind's Resumer inside the conversation's lane (after what was queued before it), the note it
returns is what the model reads, and it is never refused for the person's rate or a full lane;
an unknown kind fails clearly and calls no model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from bot import replies
from bot.config import HostSettings
from bot.host import Host
from bot.host.parts import HostStores, Outlets, Thinking
from bot.inbox import InboxState
from bot.ports.intake import Admission, Resumer
from bot.ports.model import TurnOutcome
from bot.ports.records import TurnRecord
from bot.prompt import TokenCounter
from bot.turns import Continuation, HistoryEntry, Outcome, TextBlock, TurnRequest
from tests.host.doubles import (
    CannedModel,
    MemoryHistory,
    MemoryInbox,
    MemoryOutbox,
    RecordingDeliverer,
)
from tests.host.test_host_units import KEY, no_tools, request
from tests.prompt.builders import make_assembler

WAITS = Continuation("approval", "A1")


class Desk:
    """A Resumer that says what it was given."""

    def __init__(self) -> None:
        self.resumed: list[tuple[str, Continuation]] = []

    async def resume(self, request: TurnRequest, continuation: Continuation) -> str:
        self.resumed.append((request.turn_id, continuation))
        return f"[Host note] {continuation.key} was decided"


@dataclass
class Rig:
    host: Host
    model: CannedModel
    inbox: MemoryInbox
    history: MemoryHistory
    deliverer: RecordingDeliverer
    records: list[TurnRecord]


@pytest.fixture
async def make() -> AsyncIterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for rig in made:
        await rig.host.close(grace=0)


async def start(
    made: list[Rig], model: CannedModel, resumers: dict[str, Resumer], **settings: int
) -> Rig:
    inbox, history = MemoryInbox(), MemoryHistory()
    deliverer = RecordingDeliverer()
    host = Host(
        thinking=Thinking(make_assembler(TokenCounter(), memory_enabled=False), model, no_tools),
        stores=HostStores(history, inbox, MemoryOutbox(inbox, history)),
        outlets=Outlets({"test": deliverer}),
        settings=HostSettings.model_validate(settings),
        resumers=resumers,
    )
    rig = Rig(host, model, inbox, history, deliverer, [])
    host.observers.append(rig.records.append)
    made.append(rig)
    await host.resume()
    return rig


def continuation(n: int, of: int, continues: Continuation = WAITS) -> TurnRequest:
    """What a Resumer's owner submits: turn `of`'s request, no words of its own."""
    asked = request(of)
    return replace(asked, turn_id=f"turn-{n}", text="", speaker=None, continues=continues)


async def test_a_continuation_waits_its_turn_and_its_note_is_what_the_model_reads(
    make: list[Rig],
) -> None:
    desk = Desk()
    rig = await start(
        make,
        CannedModel(gated=True),
        {"approval": desk},
        turns_per_person_per_minute=1,
        queue_per_conversation=1,
    )
    host = rig.host
    assert await host.submit(request(1), source="test", marks=["e1"]) is Admission.ACCEPTED
    await rig.model.started.wait()  # turn 1 is in the model
    assert await host.submit(request(2), source="test", marks=["e2"]) is Admission.ACCEPTED
    # Its lane is full and person 1 is over the rate, yet the continuation is taken.
    follow = continuation(3, of=1)
    assert await host.submit(follow, source="approval", marks=["approval:A1"]) is (
        Admission.ACCEPTED
    )
    assert await host.submit(follow, source="approval", marks=["approval:A1"]) is (
        Admission.DUPLICATE
    )
    resumed_while_queued = list(desk.resumed)
    rig.model.release.set()
    await host.idle()

    assert resumed_while_queued == []
    assert desk.resumed == [("turn-3", WAITS)]
    assert [plan.turn_id for plan in rig.model.plans] == ["turn-1", "turn-2", "turn-3"]
    continued = rig.model.plans[2]
    assert len(continued.history) == 4  # turns 1 and 2, published before it ran
    user = continued.builder.build(continued.prompt, continued.history).body["messages"][-1]
    assert "[Host note] A1 was decided" in str(user["content"])
    assert rig.inbox.states == {
        1: InboxState.ANSWERED,
        2: InboxState.ANSWERED,
        3: InboxState.ANSWERED,
    }


async def test_an_unknown_continuation_kind_fails_clearly_without_a_model_call(
    make: list[Rig],
) -> None:
    rig = await start(make, CannedModel(), {}, turns_per_person_per_minute=0)
    follow = continuation(1, of=1, continues=Continuation("vote", "V1"))
    await rig.host.submit(follow, source="vote", marks=["vote:V1"])
    await rig.host.idle()

    [record] = rig.records
    assert record.outcome is Outcome.FAILED
    assert record.error == "no resumer for 'vote' continuations"
    assert rig.model.plans == []
    assert [text for _, text in rig.deliverer.posted] == [replies.TURN_FAILED]


async def test_a_turn_its_tools_suspended_is_answered_and_recorded_as_suspended(
    make: list[Rig],
) -> None:
    answer = HistoryEntry("assistant", (TextBlock("It waits."),), at=datetime.now(UTC))
    suspended = TurnOutcome(text="It waits.", entries=(answer,), suspended=(WAITS,))
    rig = await start(make, CannedModel(suspended), {}, turns_per_person_per_minute=0)
    await rig.host.submit(request(1), source="test", marks=["e1"])
    await rig.host.idle()

    [record] = rig.records
    assert record.outcome is Outcome.SUSPENDED
    assert record.details["suspended"] == [{"kind": "approval", "key": "A1"}]
    assert rig.inbox.states == {1: InboxState.ANSWERED}
    assert [text for _, text in rig.deliverer.posted] == ["It waits."]
    assert [entry.text for entry in rig.history.entries[KEY]][-1] == "It waits."
