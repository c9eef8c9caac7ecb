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
from bot.turns import Outcome
from tests.host.doubles import MemoryHistory, MemoryInbox, MemoryOutbox, RecordingDeliverer
from tests.host.rig import request
from tests.prompt.builders import make_assembler


def pipeline(counter: TokenCounter, handlers: list[Handler]) -> tuple[Pipeline, MemoryOutbox]:
    inbox = MemoryInbox()
    outbox = MemoryOutbox(inbox, MemoryHistory())
    delivery = Delivery(outbox, {"test": RecordingDeliverer()})
    built = Publisher(
        outbox,
        Answering(delivery, outbox),
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
        inbox=inbox,
        assembler=make_assembler(counter, memory_enabled=False),
        completers={},
        policy=lambda request: NO_POLICY,
    ), outbox


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

    built, outbox = pipeline(counter, [shouts, answers, never])
    result = await built.run(Job(request(1, text="hello"), item_id=1))

    assert seen == ["shouts", "answers"]
    assert (result.outcome, result.text) == (Outcome.COMMAND, "you said HELLO")
    assert outbox.publications[0].state is InboxState.ANSWERED


async def test_a_handler_that_fails_concludes_the_turn_as_crashed(counter: TokenCounter) -> None:
    async def breaks(turn: Turn) -> Conclusion | None:
        raise KeyError("bug")

    built, outbox = pipeline(counter, [breaks])
    result = await built.run(Job(request(1, text="hello"), item_id=1))

    assert (result.outcome, result.error) == (Outcome.CRASHED, "KeyError")
    assert result.text == replies.TURN_FAILED
    (publication,) = outbox.publications
    assert publication.state is InboxState.CRASHED
    assert "did not complete" in publication.entries[1].text
