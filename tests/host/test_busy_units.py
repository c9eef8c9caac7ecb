"""The busy modes' small parts on their own: a stop asked for before a turn's model call starts
lands when it starts, and only on that turn."""

from __future__ import annotations

import asyncio

import pytest

from bot.host.conclusions import BY_NEWER_MESSAGE
from bot.host.pipeline import Stops
from tests.host.rig import request


async def test_a_stop_asked_for_while_a_turn_is_prepared_lands_at_its_model_call() -> None:
    stops = Stops()
    first, second = request(1), request(2)
    stops.stop_soon(first.turn_id, BY_NEWER_MESSAGE)
    reached = asyncio.Event()

    async def model_call(turn_request: object) -> None:
        with stops.stoppable(first if turn_request is first else second):
            reached.set()
            await asyncio.Event().wait()  # a model call that would never end by itself

    with pytest.raises(asyncio.CancelledError):
        await model_call(first)
    assert stops.stopped(first.turn_id) == BY_NEWER_MESSAGE
    stops.forget(first.turn_id)
    # The next turn (the newer message's own) is not touched.
    reached.clear()
    task = asyncio.create_task(model_call(second))
    await reached.wait()
    await asyncio.sleep(0)
    assert not task.done()
    assert stops.stopped(second.turn_id) is None
    task.cancel()


async def test_a_stop_for_a_turn_that_ends_before_its_model_call_is_forgotten() -> None:
    stops = Stops()
    first = request(1)
    stops.stop_soon(first.turn_id, BY_NEWER_MESSAGE)
    stops.forget(first.turn_id)  # it ended (a host command): nothing to stop any more
    with stops.stoppable(first):
        await asyncio.sleep(0)
    assert stops.stopped(first.turn_id) is None
