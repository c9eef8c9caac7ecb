"""Intake (`bot.host.intake`): storing, deduplicating, admitting under the person's rate and the
lane's depth, refusing politely, and nothing taken once shutdown begins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from bot import replies
from bot.errors import IntakeUnavailable
from bot.ports.intake import Admission, InboxItem
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.turns import Outcome, TurnRequest
from tests.host.doubles import CannedModel, MemoryInbox
from tests.host.rig import request, rig


class FullDisk(MemoryInbox):
    """An inbox that cannot write."""

    async def accept(
        self,
        request: TurnRequest,
        *,
        source: str,
        marks: Sequence[str],
        consumes: int | None = None,
    ) -> InboxItem | None:
        raise OSError("no space left on device")


async def test_a_person_over_the_rate_is_refused_with_one_notice(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel(), turns_per_person_per_minute=1)
    await r.host.resume()
    same = [replace(request(n), person="test:flooder") for n in (1, 2, 3)]
    admissions = [await r.host.submit(each, source="test", marks=[each.turn_id]) for each in same]
    await r.host.idle()

    assert admissions == [Admission.ACCEPTED, Admission.RATE_LIMITED, Admission.RATE_LIMITED]
    texts = sorted(text for _, text in r.deliverer.posted)
    assert texts == sorted(["canned answer", replies.TOO_FAST])  # one notice, not one each
    refused = [rec for rec in r.records if rec.outcome is Outcome.REFUSED]
    assert {rec.error for rec in refused} == {"rate_limited"}
    assert r.inbox.states == {
        1: InboxState.ANSWERED,
        2: InboxState.REFUSED,
        3: InboxState.REFUSED,
    }
    await r.host.close(grace=0)


async def test_an_event_the_inbox_cannot_store_is_not_acknowledged(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel(), inbox=FullDisk())
    await r.host.resume()
    admission = await r.host.submit(request(1), source="test", marks=["event-1"])

    assert admission is Admission.UNAVAILABLE
    assert not admission.acknowledge
    await r.host.close(grace=0)


async def test_once_closing_nothing_is_taken(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel())
    await r.host.resume()
    await r.host.close(grace=0)

    assert await r.host.submit(request(1), source="test", marks=["e"]) is Admission.CLOSED
    assert (await r.host.run(request(2))).outcome is Outcome.CLOSED
    with pytest.raises(IntakeUnavailable):
        await r.host.note(source="test", marks=["e2"])
    assert r.inbox.items == []


async def test_run_waits_for_the_turn_it_queues(counter: TokenCounter) -> None:
    r = rig(counter, CannedModel())
    await r.host.resume()
    result = await r.host.run(request(1))

    assert (result.outcome, result.text) == (Outcome.OK, "canned answer")
    assert r.inbox.items == []  # not from the inbox
    await r.host.close(grace=0)
