"""The pipeline (`bot.host.pipeline`): a turn passes its handlers in order until one concludes
it; a handler may change the request for the ones after it; a crash concludes as crashed."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from bot import replies
from bot.host.answering import Answering
from bot.host.conclusions import Conclusion
from bot.host.delivery import Delivery
from bot.host.job import Job
from bot.host.pipeline import Handler, Pipeline, Stops, Turn
from bot.host.publisher import Publisher
from bot.policy.surfaces import NO_POLICY
from bot.ports.outbox import InboxState
from bot.prompt import TokenCounter
from bot.testing.delivery import RecordingDeliverer
from bot.testing.store import MemoryStore, open_memory_store
from bot.turns import Outcome
from tests.host.rig import KEY, request
from tests.prompt.builders import make_assembler


def pipeline(counter: TokenCounter, handlers: list[Handler]) -> tuple[Pipeline, MemoryStore]:
    store = open_memory_store()
    delivery = Delivery(store.outbox, {"test": RecordingDeliverer()})
    built = Publisher(
        store.outbox,
        Answering(delivery, store.outbox),
        policies=None,
        budgets=None,
        memory_on=False,
        closing=asyncio.Event(),
    )
    return Pipeline(
        handlers,
        built,
        Stops(),
        delivery=delivery,
        inbox=store.inbox,
        assembler=make_assembler(counter, memory_enabled=False),
        completers={},
        policy=lambda request: NO_POLICY,
    ), store


async def accepted(store: MemoryStore, text: str) -> Job:
    """The job of a request the inbox stored."""
    item = await store.inbox.accept(request(1, text=text), source="test", marks=["event-1"])
    assert item is not None
    return Job(item.request, item.item_id)


async def test_the_first_handler_to_conclude_ends_the_turn(counter: TokenCounter) -> None:
    seen: list[str] = []

    async def shouts(turn: Turn) -> Conclusion | None:
        seen.append("shouts")
        turn.request = replace(turn.request, text=turn.request.text.upper())
        return None

    async def answers(turn: Turn) -> Conclusion | None:
        seen.append("answers")
        say = f"you said {turn.request.text}"
        return turn.answered_by_host(Outcome.COMMAND, InboxState.ANSWERED, say)

    async def never(turn: Turn) -> Conclusion | None:
        seen.append("never")
        return None

    built, store = pipeline(counter, [shouts, answers, never])
    result = await built.run(await accepted(store, "hello"))

    assert seen == ["shouts", "answers"]
    assert (result.outcome, result.text) == (Outcome.COMMAND, "you said HELLO")
    assert await store.inbox.state(1) is InboxState.ANSWERED


async def test_a_handler_that_fails_concludes_the_turn_as_crashed(counter: TokenCounter) -> None:
    async def breaks(turn: Turn) -> Conclusion | None:
        raise KeyError("bug")

    built, store = pipeline(counter, [breaks])
    result = await built.run(await accepted(store, "hello"))

    assert (result.outcome, result.error) == (Outcome.CRASHED, "KeyError")
    assert result.text == replies.TURN_FAILED
    assert await store.inbox.state(1) is InboxState.CRASHED
    kept = await store.history.load(KEY)
    assert "hello" in kept[0].text
    assert "did not complete" in kept[1].text
