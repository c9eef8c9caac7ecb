"""The publisher (`bot.host.publisher`): one publication per conclusion, then delivery and the
observers; a publication the store refuses is tried again, or left pending at shutdown."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

from bot.host.answering import Answering
from bot.host.conclusions import Conclusion
from bot.host.delivery import Delivery
from bot.host.job import Job
from bot.host.publisher import Publisher
from bot.ports.outbox import InboxState, Publication
from bot.ports.records import TurnRecord
from bot.turns import ConversationKind, Outcome
from tests.host.doubles import MemoryHistory, MemoryInbox, MemoryOutbox, RecordingDeliverer
from tests.host.rig import request


class FlakyOutbox(MemoryOutbox):
    """An outbox whose store refuses the first `failures` publications (a full disk)."""

    def __init__(self, failures: int) -> None:
        super().__init__(MemoryInbox(), MemoryHistory())
        self.failures = failures

    async def publish(self, publication: Publication) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("database or disk is full")
        await super().publish(publication)


def publisher(outbox: MemoryOutbox, closing: asyncio.Event) -> tuple[Publisher, RecordingDeliverer]:
    deliverer = RecordingDeliverer()
    delivery = Delivery(outbox, {"test": deliverer}, closing)
    built = Publisher(
        outbox,
        Answering(delivery, outbox),
        policies=None,
        budgets=None,
        memory_on=False,
        closing=closing,
    )
    return built, deliverer


def notice(job: Job, say: str = "I am busy.") -> Conclusion:
    assert job.request is not None
    at = datetime.now(UTC)
    record = TurnRecord(
        job.request.turn_id, job.request.conversation_key, "slack", at, at, Outcome.REFUSED
    )
    return Conclusion(record, InboxState.REFUSED, say)


async def test_a_conclusion_is_published_once_then_delivered_and_observed() -> None:
    outbox = FlakyOutbox(failures=0)
    built, deliverer = publisher(outbox, asyncio.Event())
    seen: list[TurnRecord] = []
    built.observers.append(seen.append)
    job = Job(request(1), item_id=7)

    result = await built.conclude(job, notice(job))

    (publication,) = outbox.publications
    assert (publication.item_id, publication.state) == (7, InboxState.REFUSED)
    assert [text for _, text in deliverer.posted] == ["I am busy."]
    assert (result.outcome, result.text) == (Outcome.REFUSED, "I am busy.")
    assert [record.details["delivered"] for record in seen] == [True]


async def test_a_request_driven_turn_is_never_told_a_host_notice() -> None:
    outbox = FlakyOutbox(failures=0)
    built, deliverer = publisher(outbox, asyncio.Event())
    job = Job(replace(request(1), kind=ConversationKind.REQUEST))

    await built.conclude(job, notice(job))

    assert deliverer.posted == []
    assert len(outbox.publications) == 1  # its record is kept all the same


async def test_a_refused_publication_is_tried_again_until_the_store_takes_it() -> None:
    outbox = FlakyOutbox(failures=2)
    built, deliverer = publisher(outbox, asyncio.Event())
    job = Job(request(1), item_id=1)

    result = await built.conclude(job, notice(job))

    assert outbox.failures == 0
    assert len(outbox.publications) == 1
    assert result.outcome is Outcome.REFUSED
    assert [text for _, text in deliverer.posted] == ["I am busy."]


async def test_at_shutdown_an_unpublished_turn_stays_pending_and_says_nothing() -> None:
    outbox = FlakyOutbox(failures=1)
    closing = asyncio.Event()
    closing.set()
    built, deliverer = publisher(outbox, closing)
    seen: list[TurnRecord] = []
    built.observers.append(seen.append)
    job = Job(request(1), item_id=1)

    result = await built.conclude(job, notice(job))

    assert (result.outcome, result.error) == (Outcome.FAILED, "publish: OSError")
    assert outbox.publications == []
    assert deliverer.posted == []
    assert seen == []
