"""The streaming core (`bot.host.streaming.AnswerStream`) and how delivery takes what it opened.

Property: whatever the text and however the model's deltas chunk it, the live messages are
opened in order, one at a time (each sealed before the next opens), never show a part over the
platform's budget, and the parts that delivery finishes or posts are exactly the non-streamed
render of the final text, in order, each once (a message the answer does not need becomes an
empty part, which delivery removes). The render is Telegram's real one at a small limit, so
answers split often.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import StreamBusy, StreamRefused
from bot.host.delivery import Delivery
from bot.host.streaming import AnswerStream
from bot.ports.delivery import LiveSession, LiveView
from bot.ports.outbox import OutboxPart, Publication
from bot.turns import ReplyRoute
from channels.telegram.deliver import TelegramDeliverer
from channels.telegram.split import utf16_length

LIMIT = 120
ROUTE = ReplyRoute("telegram", {"chat_id": 42, "thread_id": None, "reply_to": None})
RENDER = TelegramDeliverer(None, limit=LIMIT)  # type: ignore[arg-type]  # render needs no bot


@dataclass
class Session(LiveSession):
    """A LiveSession that records what it was asked to show."""

    every: float = 0.0
    calls: list[tuple[str, int, str]] = field(default_factory=list)
    refuse: bool = False
    busy: int = 0

    @property
    def interval(self) -> float:
        return self.every

    async def open(self, index: int, first: str | None, view: LiveView) -> str | None:
        if self.refuse:
            raise StreamRefused("not enabled here")
        self.calls.append(("open", index, view.formatted))
        return f"m{index}"

    async def show(self, index: int, platform_id: str | None, view: LiveView) -> None:
        if self.busy:
            self.busy -= 1
            raise StreamBusy("slow down", 0.0)
        self.calls.append(("show", index, view.formatted))

    async def seal(self, index: int, platform_id: str | None, view: LiveView) -> str | None:
        self.calls.append(("seal", index, view.formatted))
        return platform_id


class Outbox:
    """What `AnswerStream` records and `Delivery.parts` reads: the messages streams opened
    (none from a previous run here)."""

    def __init__(self) -> None:
        self.recorded: dict[int, str] = {}

    async def streamed(self, turn_id: str) -> dict[int, str]:
        return {}

    async def publish(self, publication: Publication) -> None: ...
    async def delivered(self, part_id: str, platform_id: str) -> None: ...
    async def abandon(self, part_id: str, error: str) -> None: ...
    async def undelivered(self) -> list[OutboxPart]:
        return []

    async def parts(self, turn_id: str) -> list[OutboxPart]:
        return []

    async def opened(self, turn_id: str, index: int, platform_id: str) -> None:
        self.recorded[index] = platform_id


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(max(c, 0), len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


async def stream(session: Session, deltas: list[str], yields: int) -> Mapping[int, str]:
    """Stream the deltas; the messages opened, as the stream's close returns them (each was
    recorded in the outbox as it opened, too)."""
    outbox = Outbox()
    answer = AnswerStream(session, lambda text: RENDER.render(ROUTE, text), outbox, "t")
    for delta in deltas:
        await answer.on_text(delta)
        for _ in range(yields):
            await asyncio.sleep(0)
    opened = await answer.close()
    assert outbox.recorded == opened
    return opened


WORDS = st.sampled_from(["word", "**bold**", "`code`", "\n\n", "\n- item", "\n```\nx = 1\n```\n"])


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(WORDS | st.text(max_size=12), min_size=1, max_size=60),
    cuts=st.lists(st.integers(0, 2000), max_size=40),
    yields=st.integers(0, 3),
)
def test_any_chunking_ends_as_the_non_streamed_render(
    words: list[str], cuts: list[int], yields: int
) -> None:
    text = " ".join(words)
    session = Session()

    async def run() -> list[OutboxPart]:
        recorded = await stream(session, chunked(text, cuts), yields)
        delivery = Delivery(Outbox(), {"telegram": RENDER})
        return await delivery.parts("t", "k", ROUTE, text, recorded)

    parts = asyncio.run(run())
    final = RENDER.render(ROUTE, text) if text.strip() else []
    kept = [part for part in parts if part.text]
    assert [part.text for part in kept] == final
    assert [part.index for part in parts] == list(range(len(parts)))
    assert all(not part.text for part in parts[len(final) :])  # extras: removed by delivery
    opened = [index for kind, index, _ in session.calls if kind == "open"]
    assert opened == list(range(len(opened)))
    assert all(part.platform_id == f"m{part.index}" for part in parts if part.index in opened)
    for kind, index, shown in session.calls:  # a message's next one opens only once it is sealed
        assert utf16_length(shown) <= LIMIT
        if kind == "open" and index:
            assert ("seal", index - 1) in [(k, i) for k, i, _ in session.calls]


async def test_nothing_streams_before_visible_text_and_a_refusal_stops_the_stream() -> None:
    session = Session()
    assert await stream(session, ["  ", "\n"], 2) == {}
    assert session.calls == []
    refused = Session(refuse=True)
    assert await stream(refused, ["Hello ", "there ", "and more"], 2) == {}
    assert refused.calls == []


async def test_a_rate_limited_update_waits_and_the_stream_goes_on() -> None:
    session = Session(busy=1)
    recorded = await stream(session, ["Hello ", "there, ", "and ", "more ", "words"], 3)
    assert recorded == {0: "m0"}
    assert session.calls[0] == ("open", 0, "Hello")
    assert session.calls[-1][:2] == ("show", 0)
