"""The attachment store (content-addressed, per-conversation, bounded) and `read_attachment`,
on both store engines (a real SQLite file, a real PostgreSQL schema); the intake end to end with a
channel-side file source."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.attachments.intake import AttachmentIntake
from bot.attachments.tool import MAX_OUTPUT_CHARS, ReadAttachmentTool
from bot.config import AttachmentSettings
from bot.errors import FileRefused, ToolError
from bot.ports.stores import OpenStore
from bot.testing.store import MemoryStore
from bot.turns import (
    Attachment,
    ConversationKind,
    HistoryEntry,
    ReplyRoute,
    TextBlock,
    TurnRequest,
)
from tests.engines import Clock, Engine

from . import files

pytestmark = pytest.mark.all_engines
MB = 1024 * 1024
Store = Any  # an open store of any engine (its tables are read directly here)


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[OpenStore]:
    settings = AttachmentSettings(store_max_bytes=2 * MB, store_idle_days=3)
    opened = await engine.open(attachments=settings)
    yield opened
    await opened.aclose()


async def stored_bytes(store: Store) -> list[int]:
    """The size of each attachment the store holds."""
    if isinstance(store, MemoryStore):
        return [len(row.data) for row in store.tables.attachments.values()]
    return [row["bytes"] for row in await store.db.fetch_all("SELECT bytes FROM attachments")]


def _id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_stored_once_and_seen_only_by_conversations_that_shared_it(store: Store) -> None:
    data = files.csv()
    cid = _id(data)
    await store.attachments.put("a", cid, "text/csv", data)
    await store.attachments.put("b", cid, "text/csv", data)
    assert await stored_bytes(store) == [len(data)]
    assert await store.attachments.load("a", [cid]) == {cid: data}
    assert await store.attachments.load("c", [cid]) == {}
    assert await store.attachments.find("c", cid[:16]) is None
    found = await store.attachments.find("b", cid[:16])
    assert found is not None
    assert found.data == data


async def test_a_forgotten_attachment_is_no_longer_replayed_there(store: Store) -> None:
    data = files.png()
    cid = _id(data)
    await store.attachments.put("a", cid, "image/png", data)
    await store.attachments.put("b", cid, "image/png", data)
    await store.attachments.forget("a", [cid])
    await store.attachments.forget("a", [])
    assert await store.attachments.load("a", [cid]) == {}
    assert await store.attachments.load("b", [cid]) == {cid: data}  # only that conversation


async def test_bounded_in_bytes_least_recently_used_first(store: Store, clock: Clock) -> None:
    blobs = [bytes([i]) * (MB // 2 + 1) for i in range(5)]
    for blob in blobs:
        clock.now += 10
        await store.attachments.put("a", _id(blob), "text/plain", blob)
    kept = await store.attachments.load("a", [_id(b) for b in blobs])
    assert set(kept) == {_id(b) for b in blobs[-3:]}
    assert sum(await stored_bytes(store)) == 3 * (MB // 2 + 1)


async def test_idle_attachments_age_out_and_replays_keep_them(store: Store, clock: Clock) -> None:
    old, replayed, new = b"old text", b"replayed text", b"new text"
    await store.attachments.put("a", _id(old), "text/plain", old)
    await store.attachments.put("a", _id(replayed), "text/plain", replayed)
    clock.now += 2 * 86_400
    assert await store.attachments.load("a", [_id(replayed)])  # a replay touches it
    clock.now += 2 * 86_400
    await store.attachments.put("a", _id(new), "text/plain", new)
    kept = await store.attachments.load("a", [_id(old), _id(replayed), _id(new)])
    assert set(kept) == {_id(replayed), _id(new)}


async def test_read_attachment_reads_line_and_byte_ranges_bounded(store: Store) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 5001)).encode()
    cid = _id(text)
    await store.attachments.put("conv", cid, "text/plain", text)
    tool = ReadAttachmentTool(store.attachments, "conv")
    lines = await tool({"id": cid[:16], "start_line": 10, "end_line": 12})
    assert "[lines 10-12 of 5000]" in lines
    assert "line 10\nline 11\nline 12\n</attachment>" in lines
    first = await tool({"id": cid[:16]})
    assert "[lines 1-200 of 5000]" in first
    everything = await tool({"id": cid[:16], "start_line": 1, "end_line": 5000})
    assert len(everything) < MAX_OUTPUT_CHARS + 200
    chunk = await tool({"id": cid[:16], "start_byte": 7, "max_bytes": 6})
    assert "[bytes 7-13 of" in chunk
    assert "line 2" in chunk
    with pytest.raises(ToolError, match="no attachment"):
        await ReadAttachmentTool(store.attachments, "other")({"id": cid[:16]})
    with pytest.raises(ToolError, match="past its end"):
        await tool({"id": cid[:16], "start_line": 9999})


class Files:
    """A channel's FileSource over a list of files; records what it was asked for."""

    def __init__(self, *items: bytes | FileRefused) -> None:
        self.items = items
        self.asked: list[tuple[int, int]] = []

    async def fetch(self, route: ReplyRoute, index: int, max_bytes: int) -> bytes:
        self.asked.append((index, max_bytes))
        item = self.items[index]
        if isinstance(item, FileRefused):
            raise item
        if len(item) > max_bytes:
            raise FileRefused("too_large", "counted past the cap")
        return item


def _request(*attachments: Attachment) -> TurnRequest:
    return TurnRequest(
        conversation_key="slack:T:C:1",
        kind=ConversationKind.PUSH,
        channel="slack",
        text="look",
        received_at=datetime(2026, 3, 1, tzinfo=UTC),
        turn_id="t1",
        attachments=attachments,
        route=ReplyRoute("slack", {"files": ["hidden"] * len(attachments)}),
    )


async def test_intake_reads_stores_and_explains_each_file(store: Store) -> None:
    settings = AttachmentSettings(max_bytes=4 * MB)
    source = Files(
        files.png(),
        files.pdf(3),
        files.truncated_png(),
        b"",
        FileRefused("refused", "403 from the platform"),
        files.big_file(5 * MB),
    )
    intake = AttachmentIntake(store.attachments, settings, {"slack": source})
    request = _request(
        Attachment("shot.png", "image/png", 0),
        Attachment("report.pdf", "application/pdf", 0),
        Attachment("cut.png", "image/png", 0),
        Attachment("huge.zip", "application/zip", 30 * MB),
        Attachment("secret.txt", "text/plain", 10),
        Attachment("liar.bin", "application/octet-stream", 10),
        Attachment("voice.ogg", "audio/ogg", 5000, seconds=14),
    )
    attached = await intake.take(request, [])
    kinds = [(b.kind, b.problem is None) for b in attached.blocks]
    assert kinds == [
        ("image", True),
        ("pdf", True),
        ("file", False),
        ("file", False),
        ("file", False),
        ("file", False),
        ("audio", True),
    ]
    assert [i for i, _ in source.asked] == [0, 1, 2, 4, 5]  # not the 30 MB zip, not the voice
    assert attached.blocks[1].detail == {"pages": 3}
    assert attached.blocks[6].detail == {"seconds": 14}
    assert len(attached.problems) == 4
    assert attached.problems[0].startswith("I couldn't read “cut.png”: the image could not be")
    assert "larger than the 4.0 MB limit" in attached.problems[1]
    assert "refused" in attached.problems[2]
    assert "larger than" in attached.problems[3]
    assert set(attached.contents) == {b.content_id for b in attached.blocks[:2]}
    # The next turn replays them from the store, by the content ids its history holds.
    history = [HistoryEntry("user", (TextBlock("look"), *attached.blocks))]
    later = await intake.take(_request(), history)
    assert later.contents == attached.contents
