"""Fitting a request body within a wire's limits (bot.prompt.fitting), on both wires: the bounds
hold for any mix of media sizes, the oldest go first, the text is never touched, refused content
is replaced wherever it is, and turn records never keep a payload."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.prompt.fitting import (
    LEFT_OUT_FOR_SIZE,
    LEFT_OUT_REFUSED,
    fit_request,
    media_blocks,
    media_id,
    request_size,
    strip_media,
)


def _part(wire: str, n: int, size: int) -> dict[str, Any]:
    data = base64.b64encode(bytes([n % 256]) * size + n.to_bytes(4, "big")).decode("ascii")
    if wire == "openai":
        if n % 2:
            file = {"filename": "document.pdf", "file_data": f"data:application/pdf;base64,{data}"}
            return {"type": "file", "file": file}
        return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    source = {"type": "base64", "media_type": "image/png", "data": data}
    return {"type": "image", "source": source}


def _body(wire: str, sizes: list[list[int]], text: str) -> dict[str, Any]:
    messages = []
    count = 0
    for sized in sizes:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for size in sized:
            content.append(_part(wire, count, size))
            count += 1
        messages.append({"role": "user", "content": content})
    return {"model": "m", "max_tokens": 10, "messages": messages}


def _texts(body: dict[str, Any]) -> list[str]:
    return [
        block["text"]
        for message in body["messages"]
        for block in message["content"]
        if block["type"] == "text" and block["text"] not in (LEFT_OUT_FOR_SIZE, LEFT_OUT_REFUSED)
    ]


@settings(max_examples=60, deadline=None)
@given(
    wire=st.sampled_from(["anthropic", "openai"]),
    sizes=st.lists(st.lists(st.integers(0, 6000), max_size=4), min_size=1, max_size=4),
    text=st.text(max_size=60),
    budget=st.integers(0, 40_000),
    max_media=st.one_of(st.none(), st.integers(0, 6)),
)
def test_fitting_stays_within_the_bounds_and_leaves_out_the_oldest_first(
    wire: str, sizes: list[list[int]], text: str, budget: int, max_media: int | None
) -> None:
    body = _body(wire, sizes, text)
    before = json.dumps(body)
    found = [media_id(block) for _, _, block in media_blocks(body)]
    fitted = fit_request(body, budget=budget, max_media=max_media)
    kept = [media_id(block) for _, _, block in media_blocks(fitted.body)]
    assert json.dumps(body) == before  # the input is untouched
    assert _texts(fitted.body) == _texts(body)  # the person's words always go
    assert list(fitted.left_out) == found[: len(found) - len(kept)]  # oldest first
    assert kept == found[len(found) - len(kept) :]
    if max_media is not None:
        assert len(kept) <= max_media
    if kept:  # with media left in, the body is within the budget
        assert request_size(fitted.body) <= budget
    if request_size(body) <= budget and (max_media is None or len(found) <= max_media):
        assert fitted.body == body


@given(wire=st.sampled_from(["anthropic", "openai"]), pick=st.integers(0, 5))
def test_refused_content_is_replaced_on_either_wire(wire: str, pick: int) -> None:
    body = _body(wire, [[10, 20], [30, 40, 50, 60]], "see these")
    blocks = [block for _, _, block in media_blocks(body)]
    refused = media_id(blocks[pick])
    fitted = fit_request(body, refused={refused})
    assert fitted.refused == (refused,)
    assert refused not in [media_id(b) for _, _, b in media_blocks(fitted.body)]
    assert len(list(media_blocks(fitted.body))) == len(blocks) - 1


def test_request_size_counts_a_data_url_as_the_json_does() -> None:
    body = _body("openai", [[9000, 10]], 'naïve "quoted"')
    assert request_size(body) == len(json.dumps(body).encode("utf-8"))


def test_records_keep_no_data_url_payload() -> None:
    body = _body("openai", [[9000], [100]], "hi")
    data = body["messages"][0]["content"][1]["image_url"]["url"].partition(",")[2]
    stripped = json.dumps(strip_media(body))
    assert data[:100] not in stripped
    assert "data:image/png;base64,[base64, " in stripped
    assert "data:application/pdf;base64,[base64, " in stripped
