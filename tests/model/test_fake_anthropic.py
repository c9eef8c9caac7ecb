"""The fake Anthropic server: wire behaviour through the real SDK, and its cache simulator."""

from __future__ import annotations

import base64
import io
import os
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import pytest
from PIL import Image

from tests.fakes.anthropic import (
    BLOCK_OVERHEAD,
    IMAGE_MAX_BASE64,
    MAX_REQUEST_BYTES,
    FakeAnthropic,
    ManualClock,
    Reply,
    ToolCall,
    count_request,
    count_text,
)

LONG = "The agent-wide part of the prompt, shared by every conversation. " * 120


def body(
    *texts: str, system: str = LONG, model: str = "claude-x", ttl: str | None = None
) -> dict[str, Any]:
    """A request: one cached system block, then alternating user/assistant texts, the last one
    marked with a breakpoint when there is more than one."""
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    if len(messages) > 1:
        messages[-2]["content"][-1]["cache_control"] = dict(control)
    return {
        "model": model,
        "max_tokens": 100,
        "system": [{"type": "text", "text": system, "cache_control": dict(control)}],
        "messages": messages,
    }


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def server(clock: ManualClock) -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(clock=clock) as fake:
        yield fake


@pytest.fixture
async def client(server: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(api_key="sk-test", base_url=server.base_url, max_retries=0)
    yield sdk
    await sdk.close()


async def send(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic, request: dict[str, Any]
) -> dict[str, Any]:
    await client.messages.create(**request)
    return server.usages[-1]


def system_tokens() -> int:
    return count_text(LONG) + BLOCK_OVERHEAD


async def test_first_call_writes_and_the_next_reads(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    first = await send(client, server, body("hello"))
    assert first["cache_creation_input_tokens"] == system_tokens()
    assert first["cache_read_input_tokens"] == 0
    assert first["input_tokens"] == count_text("hello") + BLOCK_OVERHEAD

    second = await send(client, server, body("a different question"))
    assert second["cache_read_input_tokens"] == system_tokens()
    assert second["cache_creation_input_tokens"] == 0
    total = count_request(body("a different question"))
    assert sum(second[k] for k in ("input_tokens", "cache_read_input_tokens")) == total


async def test_a_growing_conversation_reads_the_previous_prefix(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    await send(client, server, body("q1", "a1", "q2"))
    grown = body("q1", "a1", "q2", "a2", "q3")
    usage = await send(client, server, grown)
    previous = count_request(body("q1", "a1"))
    assert usage["cache_read_input_tokens"] == previous
    through_a2 = count_request(body("q1", "a1", "q2", "a2"))
    assert usage["cache_creation_input_tokens"] == through_a2 - previous
    assert usage["input_tokens"] == count_request(grown) - through_a2


async def test_a_changed_block_breaks_the_prefix_from_there(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    await send(client, server, body("q1", "a1", "q2"))
    usage = await send(client, server, body("q1 edited", "a1", "q2"))
    assert usage["cache_read_input_tokens"] == system_tokens()  # only the system part still matches


async def test_moving_the_breakpoint_marker_alone_keeps_the_cache(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    await send(client, server, body("q1", "a1", "q2"))
    same = body("q1", "a1", "q2")
    del same["messages"][1]["content"][0]["cache_control"]
    same["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    usage = await send(client, server, same)
    assert usage["cache_read_input_tokens"] == count_request(body("q1", "a1"))


async def test_other_model_or_tools_miss(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    await send(client, server, body("q"))
    assert (await send(client, server, body("q", model="claude-y")))["cache_read_input_tokens"] == 0
    with_tools = body("q")
    with_tools["tools"] = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
    assert (await send(client, server, with_tools))["cache_read_input_tokens"] == 0


async def test_entries_expire_after_their_ttl(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic, clock: ManualClock
) -> None:
    await send(client, server, body("q"))
    clock.advance(299)
    assert (await send(client, server, body("q")))["cache_read_input_tokens"] > 0  # refreshed
    clock.advance(299)
    assert (await send(client, server, body("q")))["cache_read_input_tokens"] > 0
    clock.advance(301)
    assert (await send(client, server, body("q")))["cache_read_input_tokens"] == 0


async def test_one_hour_lifetime(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic, clock: ManualClock
) -> None:
    first = await send(client, server, body("q", ttl="1h"))
    assert first["cache_creation"]["ephemeral_1h_input_tokens"] == system_tokens()
    assert first["cache_creation"]["ephemeral_5m_input_tokens"] == 0
    clock.advance(1800)
    assert (await send(client, server, body("q", ttl="1h")))["cache_read_input_tokens"] > 0


async def test_prefixes_under_the_minimum_are_not_cached(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    short = body("q", system="A short system prompt.")
    first = await send(client, server, short)
    assert first["cache_creation_input_tokens"] == 0
    assert (await send(client, server, short))["cache_read_input_tokens"] == 0


async def test_lookback_is_bounded_to_twenty_blocks(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    texts = [f"m{i}" for i in range(30)]
    await send(client, server, body(*texts[:3]))  # caches the prefix through m1 (block 2)

    def only_last_breakpoint(count: int) -> dict[str, Any]:
        request = body(*texts[:count])
        del request["system"][0]["cache_control"]
        return request

    # A breakpoint on block 23 looks back to block 3 at most: block 2 is out of reach.
    assert (await send(client, server, only_last_breakpoint(24)))["cache_read_input_tokens"] == 0
    near = await send(client, server, only_last_breakpoint(12))  # breakpoint on block 11
    assert near["cache_read_input_tokens"] == count_request(body(*texts[:2]))


async def test_streaming_and_count_tokens_through_the_sdk(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    server.script(
        Reply(text="Two words", tool_calls=[ToolCall("lookup", {"q": "x"}, id="toolu_1")])
    )
    request = body("what?")
    async with client.messages.stream(**request) as stream:
        deltas = [text async for text in stream.text_stream]
        message = await stream.get_final_message()
    assert "".join(deltas) == "Two words"
    assert message.stop_reason == "tool_use"
    assert message.content[1].type == "tool_use"
    assert message.content[1].input == {"q": "x"}
    counted = await client.messages.count_tokens(
        model="claude-x", system=request["system"], messages=request["messages"]
    )
    assert counted.input_tokens == count_request(request)


async def test_default_reply_and_request_record(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    message = await client.messages.create(**body("What is the weather like on the moon today?"))
    assert message.content[0].type == "text"
    assert (
        message.content[0].text
        == "Answer to: " + "What is the weather like on the moon today?"[:40]
    )
    assert server.requests[-1]["messages"][0]["content"][0]["text"].startswith("What is")


async def test_errors_carry_the_api_shape(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    server.fail(429, retry_after=3)
    with pytest.raises(anthropic.RateLimitError) as rate:
        await client.messages.create(**body("q"))
    assert rate.value.response.headers["retry-after"] == "3"
    server.fail(529)
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        await client.messages.create(**body("q"))
    assert overloaded.value.status_code == 529


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"x-api-key": "k"}, 200),
        ({"authorization": "Bearer k"}, 200),
        ({"authorization": "Bearer "}, 401),
    ],
)
async def test_auth_headers(server: FakeAnthropic, headers: dict[str, str], status: int) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.base_url}/v1/messages", json=body("q"), headers=headers) as response,
    ):
        assert response.status == status


async def test_a_configured_key_must_match() -> None:
    async with FakeAnthropic(api_key="right") as fake:
        wrong = anthropic.AsyncAnthropic(api_key="wrong", base_url=fake.base_url, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            await wrong.messages.create(**body("q"))
        await wrong.close()


async def test_reading_a_longer_prefix_keeps_the_shorter_ones_alive(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic, clock: ManualClock
) -> None:
    await send(client, server, body("q1", "a1", "q2"))  # caches the system part and through a1
    for _ in range(3):
        clock.advance(200)
        assert (await send(client, server, body("q1", "a1", "q2")))["cache_read_input_tokens"] > 0
    # 600 s after it was written, the system-only prefix is still alive: the reads refreshed it.
    usage = await send(client, server, body("another thread"))
    assert usage["cache_read_input_tokens"] == system_tokens()


# --- the API's limits on images and request size --------------------------------------------------


def _with_image(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    request = body("look")
    encoded = base64.b64encode(data).decode("ascii")
    source = {"type": "base64", "media_type": media_type, "data": encoded}
    request["messages"][0]["content"].append({"type": "image", "source": source})
    return request


def _png_with_chunk(padding: int) -> bytes:
    """A 64x48 PNG carrying a private ancillary chunk of `padding` bytes."""
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 10)).save(out, format="PNG")
    data = out.getvalue()
    filler = os.urandom(padding)
    chunk = struct.pack(">I", len(filler)) + b"prIv" + filler
    chunk += struct.pack(">I", zlib.crc32(b"prIv" + filler) & 0xFFFFFFFF)
    return data[:33] + chunk + data[33:]  # after the signature and IHDR


async def test_an_image_over_5_mb_of_base64_is_refused_like_the_api(
    client: anthropic.AsyncAnthropic,
) -> None:
    # 3.9 MB decoded is 5.2 MB of base64: over, although the file is under 5 MB.
    data = _png_with_chunk(3_940_000)
    assert len(data) < IMAGE_MAX_BASE64 < len(base64.b64encode(data))
    with pytest.raises(anthropic.BadRequestError) as refused:
        await client.messages.create(**_with_image(data))
    error = refused.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: "
    )
    assert error["message"].endswith("bytes > 5242880 bytes")
    await client.messages.create(**_with_image(_png_with_chunk(3_000_000)))  # 4.0 MB: fine


async def test_an_image_over_8000_px_a_side_is_refused(client: anthropic.AsyncAnthropic) -> None:
    out = io.BytesIO()
    Image.new("1", (8001, 10)).save(out, format="PNG")
    with pytest.raises(anthropic.BadRequestError) as refused:
        await client.messages.create(**_with_image(out.getvalue()))
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert message == (
        "messages.0.content.1.image.source.base64.data: At least one of the image dimensions "
        "exceed max allowed size: 8000 pixels"
    )


async def test_a_request_over_32_mb_gets_413_request_too_large(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    with pytest.raises(anthropic.APIStatusError) as refused:
        await client.messages.create(**body("x" * (MAX_REQUEST_BYTES + 10)))
    assert refused.value.status_code == 413
    assert refused.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    assert server.request_bytes[-1] > MAX_REQUEST_BYTES
    assert server.usages == []  # refused at the door: nothing answered, nothing counted


async def test_refuse_media_names_the_block_it_cannot_process(
    client: anthropic.AsyncAnthropic, server: FakeAnthropic
) -> None:
    bad = _png_with_chunk(10)
    server.refuse_media(lambda data: data == bad)
    with pytest.raises(anthropic.BadRequestError) as refused:
        await client.messages.create(**_with_image(bad))
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith("messages.0.content.1.image.source.base64.data: ")
    await client.messages.create(**_with_image(_png_with_chunk(11)))
