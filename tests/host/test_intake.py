"""Intake (`bot.host.intake`): storing, deduplicating, admitting under the person's rate and the
lane's depth, refusing politely, and nothing taken once shutdown begins."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot import replies
from bot.errors import IntakeUnavailable
from bot.ports.intake import Admission
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.testing.model import ScriptedModel
from bot.turns import Outcome
from tests.host.rig import request, rig


async def test_a_person_over_the_rate_is_refused_with_one_notice(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel(), turns_per_person_per_minute=1)
    await r.host.resume()
    same = [replace(request(n), person="test:flooder") for n in (1, 2, 3)]
    admissions = [await r.host.submit(each, source="test", marks=[each.turn_id]) for each in same]
    await r.host.idle()

    assert admissions == [Admission.ACCEPTED, Admission.RATE_LIMITED, Admission.RATE_LIMITED]
    # One notice, not one each; the answer and the notice may go out in either order.
    assert sorted(r.posted()) == sorted(["scripted answer", replies.TOO_FAST])
    refused = [rec for rec in r.records if rec.outcome is Outcome.REFUSED]
    assert {rec.error for rec in refused} == {"rate_limited"}
    assert r.states() == {1: InboxState.ANSWERED, 2: InboxState.REFUSED, 3: InboxState.REFUSED}
    await r.host.close(grace=0)


async def test_an_event_the_inbox_cannot_store_is_not_acknowledged(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    with r.store.tables.failing("inbox"):  # a full disk
        admission = await r.host.submit(request(1), source="test", marks=["event-1"])

    assert admission is Admission.UNAVAILABLE
    assert not admission.acknowledge
    assert r.states() == {}
    # Not marked as seen either: the platform's redelivery of the event is taken.
    assert await r.host.submit(request(1), source="test", marks=["event-1"]) is (Admission.ACCEPTED)
    await r.host.idle()
    assert r.posted() == ["scripted answer"]
    await r.host.close(grace=0)


async def test_once_closing_nothing_is_taken(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    await r.host.close(grace=0)

    assert await r.host.submit(request(1), source="test", marks=["e"]) is Admission.CLOSED
    assert (await r.host.run(request(2))).outcome is Outcome.CLOSED
    with pytest.raises(IntakeUnavailable):
        await r.host.note(source="test", marks=["e2"])
    assert r.states() == {}


async def test_run_waits_for_the_turn_it_queues(counter: TokenCounter) -> None:
    r = rig(counter, ScriptedModel())
    await r.host.resume()
    result = await r.host.run(request(1))

    assert (result.outcome, result.text) == (Outcome.OK, "scripted answer")
    assert r.states() == {}  # not from the inbox
    await r.host.close(grace=0)
