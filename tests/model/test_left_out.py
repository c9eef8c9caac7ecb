"""No poison turns in the model runtime: a request the API refuses for what it carried is sent
again without that content, and what was left out comes back to the host; every body is fitted
under the API's request size first."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from bot.errors import TurnFailed
from bot.model import AnthropicRuntime
from bot.ports.model import AssembledRequest, LeftOut, TurnPlan
from bot.ports.request import Image, Message
from bot.turns import HistoryEntry
from tests.attachments import files
from tests.fakes.anthropic import FakeAnthropic
from tests.model.conftest import PROMPT, Builder, make_assemble


def _image(data: bytes) -> Image:
    return Image("image/png", base64.b64encode(data).decode("ascii"))


def _plan(*images: bytes) -> TurnPlan:
    base = make_assemble("what are these?")

    def assemble(history: Sequence[HistoryEntry]) -> AssembledRequest:
        built = base(history)
        *before, last = built.request.messages
        with_images = Message(last.role, (*last.parts, *map(_image, images)))
        request = replace(built.request, messages=(*before, with_images))
        return AssembledRequest(request, built.estimated_tokens, built.history_used)

    return TurnPlan("turn-1", "console:test", (), PROMPT, Builder(assemble))


def _id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _images(body: dict[str, Any]) -> int:
    return sum(1 for b in body["messages"][-1]["content"] if b["type"] == "image")


async def test_the_refused_block_alone_is_left_out(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    good, bad = files.png(10, 10), files.png(12, 12)
    fake.refuse_media(lambda data: data == bad)
    outcome = await runtime.run(_plan(good, bad))
    assert [_images(body) for body in fake.requests] == [2, 1]
    assert outcome.left_out == (LeftOut(_id(bad), refused=True),)


async def test_a_413_sends_the_turn_without_media_for_its_size(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    data = files.png(10, 10)
    fake.fail(413, body="Request exceeds the maximum allowed number of bytes.")
    outcome = await runtime.run(_plan(data))
    assert [_images(body) for body in fake.requests] == [1, 0]
    assert outcome.left_out == (LeftOut(_id(data), refused=False),)


async def test_a_refusal_that_was_not_the_content_forgets_nothing(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    fake.fail(400, times=2)  # unnamed, and again without the image: the image was not the cause
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(_plan(files.png(10, 10)))
    assert [_images(body) for body in fake.requests] == [1, 0]
    assert caught.value.spend.left_out == ()


async def test_named_content_stays_left_out_when_the_turn_fails_anyway(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    bad = files.png(12, 12)

    def refuse(data: bytes) -> bool:
        if data == bad:
            fake.fail(400)  # and the next try, without it, fails for another reason
        return data == bad

    fake.refuse_media(refuse)
    with pytest.raises(TurnFailed) as caught:
        await runtime.run(_plan(bad))
    assert [_images(body) for body in fake.requests] == [1, 0]
    assert caught.value.spend.left_out == (LeftOut(_id(bad), refused=True),)


async def test_a_request_over_the_budget_leaves_the_oldest_media_out(
    runtime: AnthropicRuntime, fake: FakeAnthropic
) -> None:
    big = [files.png_with_private_chunk(3_500_000 + n) for n in range(8)]  # 8 x 4.7 MB base64
    outcome = await runtime.run(_plan(*big))
    [sent] = fake.requests
    assert _images(sent) == 6
    assert fake.request_bytes[0] <= 30_000_000
    assert outcome.left_out == tuple(LeftOut(_id(d), refused=False) for d in big[:2])
