"""Attachment overhead (issue 16): the host's time for a turn with one shared photo, and the input
tokens the photo adds to the request.

    .venv/bin/python -m benchmarks.attachments [--megabytes 4] [--iterations 15] [--warmup 2]

The real path, end to end except the model call: the Slack channel's downloader fetches the photo
from the fake Slack's file server on 127.0.0.1 (bot token checked, bytes counted against the cap),
the intake decodes it with Pillow, turns it upright, downscales it to the recommended size and
re-encodes it (off the event loop, as in a turn), stores it content-addressed in a SQLite store
in a temporary folder, and the assembler renders the request with the image block (base64).
Printed: p50 and p99 of that whole span, the photo's size and pixels in and out, and the added
input tokens (the assembler's estimate, and the fake Messages API's count of the request, which
charges an image width*height/750 tokens as the provider documents). Target: p50 under 300 ms for
a 4 MB photo. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import structlog
from PIL import Image

from bot.attachments.intake import AttachmentIntake
from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.model.wire import encode
from bot.prompt import AgentTexts, Assembler, ModelLimits, TokenCounter
from bot.store.sqlite import open_store
from bot.turns import Attachment, ConversationKind, ReplyRoute, Speaker, TurnRequest
from channels.slack.files import SlackFiles
from tests.fakes.anthropic import count_request
from tests.fakes.slack import FakeSlack


def photo(megabytes: float, seed: int = 16) -> bytes:
    """A camera-sized JPEG of about `megabytes` (noise compresses like a real photo's detail)."""
    width, height = (4032, 3024) if megabytes >= 1 else (800, 600)
    rng = random.Random(seed)
    tile = Image.frombytes("RGB", (256, 256), rng.randbytes(256 * 256 * 3))
    image = Image.new("RGB", (width, height))
    for x in range(0, width, 256):
        for y in range(0, height, 256):
            image.paste(tile.rotate(90 * rng.randrange(4)), (x, y))
    target = megabytes * 1024 * 1024
    data = b""
    for quality in (30, 45, 60, 75, 85, 92, 97):
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=quality)
        data = out.getvalue()
        if len(data) >= target:
            break
    return data


def request(index: int, files: int) -> TurnRequest:
    return TurnRequest(
        conversation_key=f"slack:T:C:{index}",
        kind=ConversationKind.PUSH,
        channel="slack",
        text="what is in this photo?",
        received_at=datetime(2026, 12, 1, tzinfo=UTC),
        turn_id=f"bench-{index}",
        speaker=Speaker("Alice Chen", "alice"),
        attachments=tuple(Attachment("photo.jpg", "image/jpeg", 0) for _ in range(files)),
        route=ReplyRoute("slack", {"files": []}),
    )


async def run(megabytes: float, iterations: int, warmup: int) -> None:
    data = photo(megabytes)
    assembler = Assembler(
        AgentTexts("Be brief.", "You are a test agent.", (), ()),
        ModelLimits("claude-sonnet-4-6", 1024, 200_000),
        timezone="UTC",
        counter=TokenCounter(),
    )
    settings = AttachmentSettings(max_bytes=32 * 1024 * 1024)
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(
            StoreSettings(path=Path(folder) / "db" / "bot.sqlite3"),
            MemorySettings(),
            attachments=settings,
        )
        async with FakeSlack() as slack:
            shared = slack.add_file("photo.jpg", data, "image/jpeg")
            files = SlackFiles(slack.bot_token, slack.files_url)
            intake = AttachmentIntake(store.attachments, settings, {"slack": files})
            spans: list[float] = []
            for index in range(warmup + iterations):
                route = ReplyRoute("slack", {"files": [shared["url_private"]]})
                turn = replace(request(index, 1), route=route)
                began = time.perf_counter()
                attached = await intake.take(turn, [])
                body = assembler.assemble(turn, [], attached=attached)
                if index >= warmup:
                    spans.append(time.perf_counter() - began)
            plain = assembler.assemble(request(0, 0), [])
            await files.aclose()
        await store.aclose()
    [block] = attached.blocks
    assert block.problem is None, block.problem
    with Image.open(io.BytesIO(data)) as original:
        before = original.size
    spans.sort()
    p99 = spans[min(len(spans) - 1, int(len(spans) * 0.99))]
    print(
        f"photo: {len(data) / 1024 / 1024:.2f} MB, {before[0]}×{before[1]} px -> "
        f"{block.detail['width']}×{block.detail['height']} px, "
        f"{len(attached.contents[block.content_id or '']) / 1024:.0f} KB stored"
    )
    print(
        f"host overhead (download, decode, downscale, encode, store, assemble) over "
        f"{len(spans)} turns: p50: {statistics.median(spans) * 1000:.1f} ms, "
        f"p99: {p99 * 1000:.1f} ms (target: p50 < 300 ms)"
    )
    estimated = body.estimated_tokens - plain.estimated_tokens
    counted = count_request(encode(body.request)) - count_request(encode(plain.request))
    print(
        f"added input tokens: {estimated} estimated by the assembler, "
        f"{counted} counted by the fake Messages API"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks.attachments", description=__doc__)
    parser.add_argument("--megabytes", type=float, default=4.0)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(40), cache_logger_on_first_use=False
    )
    asyncio.run(run(args.megabytes, args.iterations, args.warmup))


if __name__ == "__main__":
    main()
