"""The console's deliverer through the one delivery path (`bot.host.delivery`): an answer streamed
to
the terminal is printed as it is written and never again; parts an earlier terminal left are
not printed here."""

from __future__ import annotations

import io

from bot.host.delivery import Delivery
from bot.ports.outbox import OutboxPart, Publication
from bot.testing.inbox import MemoryOutbox
from bot.testing.store import open_memory_store
from channels.console import ConsoleDeliverer
from tests.waiting import until

KEY = "console:test"


async def answer(
    console: ConsoleDeliverer, out: io.StringIO, deltas: list[str], final: str
) -> MemoryOutbox:
    """Stream `deltas` as the model would, then publish and deliver `final` as the host does.
    The first delta is on the terminal before the rest come, and they come faster than the
    stream updates (so its end prints them)."""
    outbox = open_memory_store().outbox
    delivery = Delivery(outbox, {"console": console})
    route = console.route("t1")
    stream = delivery.stream("t1", route)
    assert stream is not None
    await stream.on_text(deltas[0])
    await until(lambda: out.getvalue() == deltas[0])
    for delta in deltas[1:]:
        await stream.on_text(delta)
    live = await stream.close()
    parts = await delivery.parts("t1", KEY, route, final, live, resumed=False)
    await outbox.publish(Publication(KEY, parts=parts))
    report = await delivery.send(route, parts)
    assert report is not None
    assert report.delivered
    return outbox


async def test_a_streamed_answer_is_printed_as_written_and_once() -> None:
    out = io.StringIO()
    outbox = await answer(
        ConsoleDeliverer(out), out, ["Hel", "lo ", "**there**"], "Hello **there**"
    )
    assert out.getvalue() == "Hello **there**\n"
    assert [part.platform_id for part in await outbox.parts("t1")] == ["t1.0"]
    assert await outbox.undelivered() == []


async def test_text_streamed_before_a_tool_call_stays_and_the_answer_is_not_printed_again() -> None:
    out = io.StringIO()
    await answer(ConsoleDeliverer(out), out, ["Let me look. ", "Found ", "it."], "Found it.")
    assert out.getvalue() == "Let me look. Found it.\n"


async def test_an_answer_that_did_not_stream_is_printed_whole() -> None:
    out = io.StringIO()
    console = ConsoleDeliverer(out)
    outbox = open_memory_store().outbox
    delivery = Delivery(outbox, {"console": console})
    route = console.route("t2")
    parts = await delivery.parts("t2", KEY, route, "Busy, one moment.", resumed=False)
    await outbox.publish(Publication(KEY, parts=parts))
    report = await delivery.send(route, parts)
    assert report is not None
    assert report.delivered
    assert out.getvalue() == "Busy, one moment.\n"


async def test_a_part_an_earlier_terminal_left_is_given_up_not_printed() -> None:
    out = io.StringIO()
    outbox = open_memory_store().outbox
    earlier = ConsoleDeliverer(io.StringIO())
    part = OutboxPart("t0.0", "t0", KEY, 0, earlier.route("t0"), "an old answer")
    await outbox.publish(Publication(KEY, parts=[part]))
    report = await Delivery(outbox, {"console": ConsoleDeliverer(out)}).drain()
    assert not report.delivered
    assert out.getvalue() == ""
    assert await outbox.undelivered() == []  # abandoned: no later start tries it again
    assert [part.platform_id for part in await outbox.parts("t0")] == [None]
