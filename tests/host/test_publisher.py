"""The publisher (`bot.host.publisher`): one publication per conclusion, then delivery and the
observers; a publication the store refuses is tried again, or left pending at shutdown. Through
the in-memory store of `bot.testing`, told to refuse the next writes (`Tables.fail_next`)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

from bot.host.answering import Answering
from bot.host.conclusions import Conclusion
from bot.host.delivery import Delivery
from bot.host.job import Job
from bot.host.publisher import Publisher
from bot.ports.outbox import InboxState
from bot.ports.records import TurnRecord
from bot.testing.delivery import RecordingDeliverer
from bot.testing.store import MemoryStore, open_memory_store
from bot.turns import ConversationKind, Outcome, TurnRequest
from tests.host.rig import request


def publisher(store: MemoryStore, closing: asyncio.Event) -> tuple[Publisher, RecordingDeliverer]:
    deliverer = RecordingDeliverer()
    delivery = Delivery(store.outbox, {"test": deliverer}, closing)
    built = Publisher(
        store.outbox,
        Answering(delivery, store.outbox),
        policies=None,
        budgets=None,
        memory_on=False,
        closing=closing,
    )
    return built, deliverer


async def accepted(store: MemoryStore, asked: TurnRequest) -> Job:
    """The job of a request the inbox stored."""
    item = await store.inbox.accept(asked, source="test", marks=[asked.turn_id])
    assert item is not None
    return Job(item.request, item.item_id)


def notice(job: Job, say: str = "I am busy.") -> Conclusion:
    assert job.request is not None
    at = datetime.now(UTC)
    record = TurnRecord(
        job.request.turn_id, job.request.conversation_key, "slack", at, at, Outcome.REFUSED
    )
    return Conclusion(record, InboxState.REFUSED, say)


async def test_a_conclusion_is_published_once_then_delivered_and_observed() -> None:
    store = open_memory_store()
    built, deliverer = publisher(store, asyncio.Event())
    seen: list[TurnRecord] = []
    built.observers.append(seen.append)
    job = await accepted(store, request(1))

    result = await built.conclude(job, notice(job))

    (publication,) = store.outbox.publications
    assert (publication.item_id, publication.state) == (1, InboxState.REFUSED)
    assert await store.inbox.state(1) is InboxState.REFUSED
    assert deliverer.texts == ["I am busy."]
    assert (result.outcome, result.text) == (Outcome.REFUSED, "I am busy.")
    assert [record.details["delivered"] for record in seen] == [True]


async def test_a_request_driven_turn_is_never_told_a_host_notice() -> None:
    store = open_memory_store()
    built, deliverer = publisher(store, asyncio.Event())
    job = await accepted(store, replace(request(1), kind=ConversationKind.REQUEST))

    await built.conclude(job, notice(job))

    assert deliverer.posted == []
    assert len(store.outbox.publications) == 1  # its record is kept all the same
    assert await store.inbox.state(1) is InboxState.REFUSED


async def test_a_refused_publication_is_tried_again_until_the_store_takes_it() -> None:
    store = open_memory_store()
    built, deliverer = publisher(store, asyncio.Event())
    job = await accepted(store, request(1))
    store.tables.fail_next("turn_records", 2)  # a full disk, for two tries

    result = await built.conclude(job, notice(job))

    assert store.tables.failing_writes["turn_records"] == 0  # both refusals were met
    assert len(store.outbox.publications) == 1
    assert result.outcome is Outcome.REFUSED
    assert deliverer.texts == ["I am busy."]
    assert await store.inbox.state(1) is InboxState.REFUSED


async def test_a_turn_published_before_is_not_tried_again_and_holds_nothing_up() -> None:
    """A publication refused for a unique key (its parts are stored: the turn ran twice) can
    never be taken: the turn ends there, unsaid, instead of holding its conversation's lane."""
    store = open_memory_store()
    built, deliverer = publisher(store, asyncio.Event())  # not closing: others are retried
    job = await accepted(store, request(1))
    await built.conclude(job, notice(job))

    again = await asyncio.wait_for(built.conclude(job, notice(job)), 60)  # fails, not hangs

    assert (again.outcome, again.error) == (Outcome.FAILED, "publish: DuplicateKey")
    assert len(store.outbox.publications) == 1
    assert deliverer.texts == ["I am busy."]  # said once


async def test_at_shutdown_an_unpublished_turn_stays_pending_and_says_nothing() -> None:
    store = open_memory_store()
    closing = asyncio.Event()
    closing.set()
    built, deliverer = publisher(store, closing)
    seen: list[TurnRecord] = []
    built.observers.append(seen.append)
    job = await accepted(store, request(1))
    store.tables.fail_next("turn_records", 1)

    result = await built.conclude(job, notice(job))

    assert (result.outcome, result.error) == (Outcome.FAILED, "publish: StoreFault")
    assert store.outbox.publications == []
    assert await store.inbox.state(1) is InboxState.PENDING  # it runs again after the next start
    assert deliverer.posted == []
    assert seen == []
