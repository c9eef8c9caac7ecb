"""The durable inbox and outbox: accept with dedupe marks in one transaction, publications that
write history, parts, item state and record together, part delivery, bounds and full disks."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import aiosqlite
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import DuplicateKey
from bot.ports.history import Chatter
from bot.ports.memory import MemoryCapture
from bot.ports.outbox import InboxState, OutboxPart, Publication
from bot.ports.records import TurnRecord, Usage, UsageEntry
from bot.ports.stores import OpenStore
from bot.store.sql.request_codec import decode_request, encode_request
from bot.testing.store import MemoryStore
from bot.turns import (
    Continuation,
    ConversationKind,
    PrecedingMessage,
    ReplyRoute,
    Speaker,
    Surface,
    SurfaceKind,
    TurnRequest,
    Viewing,
)
from tests.engines import WRITE_FAILED, Clock, Engine
from tests.store.sqlite.full_disk import fill, make_room
from tests.store.sqlite.helpers import assistant, user

pytestmark = pytest.mark.all_engines
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def request(n: int, key: str = "slack:T1:C1:1.0", text: str | None = None) -> TurnRequest:
    return TurnRequest(
        conversation_key=key,
        kind=ConversationKind.PUSH,
        channel="slack",
        text=text or f"question {n}",
        received_at=T0 + timedelta(seconds=n),
        turn_id=f"turn{n}",
        speaker=Speaker("Alice Chen", "alice"),
        surface=Surface(SurfaceKind.CHANNEL, "C1", "general", True, 3800, "Slack", True),
        preceding=(PrecedingMessage(T0, "Bob", "earlier", "bob"),),
        route=ReplyRoute("slack", {"channel": "C1", "thread_ts": "1.0", "message_ts": f"{n}.5"}),
        person="slack:T1:U1",
    )


def part(turn: int, index: int, key: str = "slack:T1:C1:1.0") -> OutboxPart:
    return OutboxPart(
        part_id=f"turn{turn}.{index}",
        turn_id=f"turn{turn}",
        conversation_key=key,
        index=index,
        route=ReplyRoute("slack", {"channel": "C1", "thread_ts": "1.0"}),
        text=f"answer {turn} part {index}",
    )


def record(turn: int, outcome: str = "ok") -> TurnRecord:
    return TurnRecord(f"turn{turn}", "slack:T1:C1:1.0", "slack", T0, T0, outcome)


async def test_accept_stores_the_whole_request_once_per_mark(store: OpenStore) -> None:
    item = await store.inbox.accept(request(1), source="slack", marks=["Ev1", "C1:1.5"])
    assert item is not None
    assert await store.inbox.accept(request(1), source="slack", marks=["Ev1"]) is None
    # The same message delivered under another event id (message and app_mention) is one turn.
    assert await store.inbox.accept(request(1), source="slack", marks=["Ev2", "C1:1.5"]) is None
    assert await store.inbox.accept(request(1), source="telegram", marks=["Ev1"]) is not None

    pending = await store.inbox.pending()
    assert pending[0].item_id == item.item_id
    assert pending[0].request == request(1)  # route, speaker, surface, preceding: all of it
    assert await store.inbox.state(item.item_id) is InboxState.PENDING


async def test_racing_redeliveries_get_exactly_one_item(store: OpenStore) -> None:
    answers = await asyncio.gather(
        *(store.inbox.accept(request(1), source="slack", marks=["Ev9"]) for _ in range(20))
    )
    assert sum(answer is not None for answer in answers) == 1
    assert len(await store.inbox.pending()) == 1


async def test_note_marks_events_that_start_no_turn(store: OpenStore) -> None:
    assert await store.inbox.note(source="telegram", marks=["17"]) is True
    assert await store.inbox.note(source="telegram", marks=["17"]) is False
    assert await store.inbox.accept(request(1), source="telegram", marks=["17"]) is None
    assert await store.inbox.pending() == []


def chatter(text: str, key: str = "telegram:-100") -> Chatter:
    return Chatter(key, PrecedingMessage(at=T0, name="Dana", text=text, handle="dana"), keep=50)


async def test_note_buffers_chatter_with_its_mark_and_a_redelivery_not_again(
    store: OpenStore,
) -> None:
    assert await store.inbox.note(source="telegram", marks=["21"], chatter=chatter("hi")) is True
    assert await store.inbox.note(source="telegram", marks=["21"], chatter=chatter("hi")) is False
    buffered = await store.buffer.peek("telegram:-100")
    assert [m.text for m in buffered.messages] == ["hi"]


async def test_a_chatter_write_that_fails_records_neither_mark_nor_message(
    engine: Engine, store: OpenStore
) -> None:
    # The buffer's statements fail after the mark's, inside the one transaction.
    async with engine.failing(store, "chat_buffer"):
        with pytest.raises(WRITE_FAILED):
            await store.inbox.note(source="telegram", marks=["22"], chatter=chatter("kept"))
    assert (await store.buffer.peek("telegram:-100")).messages == ()
    # Not recorded as seen: the redelivered update is taken, and buffered once.
    assert await store.inbox.note(source="telegram", marks=["22"], chatter=chatter("kept")) is True
    buffered = await store.buffer.peek("telegram:-100")
    assert [m.text for m in buffered.messages] == ["kept"]


async def test_pending_keeps_acceptance_order_and_claims_count_attempts(store: OpenStore) -> None:
    items = [
        await store.inbox.accept(request(n, key=f"k{n % 2}"), source="s", marks=[f"e{n}"])
        for n in range(4)
    ]
    assert all(items)
    first = items[0]
    assert first is not None
    assert await store.inbox.claim(first.item_id) == 1
    assert await store.inbox.claim(first.item_id) == 2
    pending = await store.inbox.pending()
    assert [p.request.turn_id for p in pending] == ["turn0", "turn1", "turn2", "turn3"]
    assert pending[0].attempts == 2


async def test_a_publication_writes_history_parts_state_and_record_together(
    store: OpenStore,
) -> None:
    item = await store.inbox.accept(request(1), source="slack", marks=["Ev1"])
    assert item is not None
    await store.outbox.publish(
        Publication(
            conversation_key="slack:T1:C1:1.0",
            entries=[user("question 1"), assistant("answer 1")],
            parts=[part(1, 0), part(1, 1)],
            item_id=item.item_id,
            state=InboxState.ANSWERED,
            record=record(1),
        )
    )
    assert [e.text for e in await store.history.load("slack:T1:C1:1.0")] == [
        "question 1",
        "answer 1",
    ]
    assert await store.inbox.pending() == []
    assert await store.inbox.state(item.item_id) is InboxState.ANSWERED
    assert await store.records.show("turn1") is not None
    assert [p.part_id for p in await store.outbox.undelivered()] == ["turn1.0", "turn1.1"]


def charged(turn: int) -> UsageEntry:
    usage = Usage(input_tokens=10, output_tokens=5)
    return UsageEntry(f"turn{turn}", T0, "slack", "slack:C1", "slack:T1:U1", "m", usage, 0.01)


def captured(turn: int) -> MemoryCapture:
    return MemoryCapture(
        conversation_key="slack:T1:C1:1.0",
        surface="slack:C1",
        person="slack:T1:U1",
        speaker_label="Alice Chen (@alice)",
        user_text="the launch code word is marigold",
        answer="Noted.",
        at=T0,
        turn_id=f"turn{turn}",
    )


def answered(item_id: int, turn: int = 1) -> Publication:
    return Publication(
        conversation_key="slack:T1:C1:1.0",
        entries=[user(f"question {turn}"), assistant(f"answer {turn}")],
        parts=[part(turn, 0)],
        item_id=item_id,
        state=InboxState.ANSWERED,
        record=record(turn),
        usage=charged(turn),
        capture=captured(turn),
    )


async def test_a_publication_charges_and_captures_the_turn_in_its_transaction(
    store: OpenStore,
) -> None:
    item = await store.inbox.accept(request(1), source="slack", marks=["Ev1"])
    assert item is not None
    await store.outbox.publish(answered(item.item_id))

    assert [e.turn_id for e in await store.usage.rows()] == ["turn1"]
    assert [m.text for m in await store.memory.search("marigold")] == [
        "User (Alice Chen (@alice)): the launch code word is marigold\nAssistant: Noted."
    ]


async def test_a_capture_that_fails_is_undone_alone_and_the_publication_stands(
    engine: Engine, store: OpenStore
) -> None:
    item = await store.inbox.accept(request(1), source="slack", marks=["Ev1"])
    assert item is not None
    # The capture's word counts fail after its memory row was written.
    async with engine.failing(store, "term_docs"):
        await store.outbox.publish(answered(item.item_id))

    assert [e.text for e in await store.history.load("slack:T1:C1:1.0")] == [
        "question 1",
        "answer 1",
    ]
    assert await store.inbox.pending() == []
    assert [e.turn_id for e in await store.usage.rows()] == ["turn1"]
    assert await store.memory.search("marigold") == []


async def test_opened_stream_messages_are_kept_until_the_publication_takes_them(
    store: OpenStore,
) -> None:
    """Streaming (issue 15): the ids of messages a stream opened survive a restart until the
    turn's publication carries them on its parts (which delivery then finishes)."""
    await store.outbox.opened("turn1", 0, "1700.1")
    await store.outbox.opened("turn1", 1, "1700.2")
    await store.outbox.opened("turn1", 1, "1700.3")  # the same message again: the last id wins
    await store.outbox.opened("turn2", 0, "1800.1")
    assert await store.outbox.streamed("turn1") == {0: "1700.1", 1: "1700.3"}
    taken = [replace(part(1, 0), platform_id="1700.1"), replace(part(1, 1), platform_id="1700.3")]
    await store.outbox.publish(Publication(conversation_key="slack:T1:C1:1.0", parts=taken))
    assert await store.outbox.streamed("turn1") == {}
    assert await store.outbox.streamed("turn2") == {0: "1800.1"}
    pending = await store.outbox.undelivered()
    assert [(p.part_id, p.platform_id) for p in pending] == [
        ("turn1.0", "1700.1"),
        ("turn1.1", "1700.3"),
    ]


async def test_a_failed_publication_writes_nothing(store: OpenStore) -> None:
    item = await store.inbox.accept(request(1), source="slack", marks=["Ev1"])
    assert item is not None
    broken = Publication(
        conversation_key="slack:T1:C1:1.0",
        entries=[user("question 1"), assistant("answer 1")],
        parts=[part(1, 0), part(1, 0)],  # the same part twice: the UNIQUE constraint refuses it
        item_id=item.item_id,
        state=InboxState.ANSWERED,
        record=record(1),
    )
    broken = replace(broken, usage=charged(1), capture=captured(1))
    with pytest.raises(DuplicateKey):  # on every engine: the port's error, not the driver's
        await store.outbox.publish(broken)
    assert await store.usage.rows() == []
    assert await store.memory.search("marigold") == []
    assert await store.history.load("slack:T1:C1:1.0") == []
    assert [p.item_id for p in await store.inbox.pending()] == [item.item_id]
    assert await store.records.show("turn1") is None
    assert await store.outbox.undelivered() == []


async def test_a_publication_ends_the_items_its_turn_took_in_as_consumed_by_it(
    store: OpenStore,
) -> None:
    items = [
        await store.inbox.accept(request(n), source="slack", marks=[f"Ev{n}"]) for n in (1, 2, 3)
    ]
    first, second, third = (item.item_id for item in items if item is not None)
    took_in = Publication(
        conversation_key="slack:T1:C1:1.0",
        entries=[user("question 1"), user("question 2"), assistant("answer 1 and 2")],
        parts=[part(1, 0), part(1, 0)],  # refused first: nothing of it is written
        item_id=first,
        state=InboxState.ANSWERED,
        record=record(1),
        consumed=(second,),
    )
    with pytest.raises(DuplicateKey):
        await store.outbox.publish(took_in)
    assert [p.item_id for p in await store.inbox.pending()] == [first, second, third]
    await store.outbox.publish(replace(took_in, parts=[part(1, 0)]))
    assert [p.item_id for p in await store.inbox.pending()] == [third]
    assert await store.inbox.state(second) == InboxState.CONSUMED
    assert await store.inbox.consumed_by(second) == "turn1"
    assert await store.inbox.consumed_by(first) is None


async def test_parts_are_delivered_or_abandoned_once(store: OpenStore) -> None:
    await store.outbox.publish(
        Publication("k", parts=[part(1, 0, "k"), part(1, 1, "k"), part(2, 0, "k")])
    )
    await store.outbox.delivered("turn1.0", "1700000000.000100")
    await store.outbox.abandon("turn2.0", "channel_not_found")

    assert [p.part_id for p in await store.outbox.undelivered()] == ["turn1.1"]
    parts = await store.outbox.parts("turn1")
    assert [(p.index, p.platform_id) for p in parts] == [(0, "1700000000.000100"), (1, None)]
    assert parts[1].route == ReplyRoute("slack", {"channel": "C1", "thread_ts": "1.0"})


async def test_settled_items_parts_and_old_marks_are_pruned(
    engine: Engine, store: OpenStore, clock: Clock
) -> None:
    inbox = engine.inbox(store, keep=5, max_age_days=1)
    item = await inbox.accept(request(1), source="s", marks=["old"])
    assert item is not None
    await store.outbox.publish(
        Publication("k", parts=[part(1, 0, "k")], item_id=item.item_id, state=InboxState.SILENT)
    )
    await store.outbox.delivered("turn1.0", "1")
    still = await inbox.accept(request(2), source="s", marks=["pending"])
    clock.advance(2 * 86_400)
    for n in range(8):
        await inbox.note(source="s", marks=[f"new{n}"])
        clock.advance(1)

    await inbox.prune()

    assert await marks_kept(store) == [f"new{n}" for n in range(3, 8)]
    assert await inbox.state(item.item_id) is None  # finished long ago: gone
    assert still is not None
    assert await inbox.state(still.item_id) is InboxState.PENDING
    assert await store.outbox.parts("turn1") == []


async def marks_kept(store: OpenStore) -> list[str]:
    """The dedupe marks the store holds, oldest first."""
    if isinstance(store, MemoryStore):
        kept = sorted(store.tables.marks.items(), key=lambda mark: mark[1])
        return [event for (_, event), _ in kept]
    rows = await store.db.fetch_all("SELECT event_id FROM events ORDER BY seen_at")
    return [row["event_id"] for row in rows]


@pytest.mark.both_engines
async def test_a_full_disk_refuses_the_accept_and_records_no_mark(
    engine: Engine, store: OpenStore
) -> None:
    if engine.postgres:
        pytest.skip("a size-capped file is SQLite's; PostgreSQL's disk is the server's")

    async def cap(conn: aiosqlite.Connection) -> None:
        async with conn.execute("PRAGMA page_count") as cursor:
            row = await cursor.fetchone()
        assert row is not None
        await conn.execute(f"PRAGMA max_page_count = {row[0]}")

    await store.db.write(cap)
    big = request(1, text="x" * 200_000)  # needs pages the capped file does not have
    with pytest.raises(sqlite3.OperationalError, match="full"):
        await store.inbox.accept(big, source="slack", marks=["Ev1"])

    await store.db.write(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
    # Space is back: the redelivered event is accepted, as if seen for the first time.
    assert await store.inbox.accept(big, source="slack", marks=["Ev1"]) is not None


printable = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    text=printable,
    name=printable,
    handle=st.none() | printable,
    values=st.dictionaries(printable, st.none() | st.integers() | printable, max_size=4),
    viewing=st.none() | st.builds(Viewing, st.sampled_from(SurfaceKind), st.none() | printable),
    continues=st.none() | st.builds(Continuation, printable, printable),
)
def test_any_request_round_trips_through_its_stored_form(
    text: str,
    name: str,
    handle: str | None,
    values: dict[str, object],
    viewing: Viewing | None,
    continues: Continuation | None,
) -> None:
    original = TurnRequest(
        conversation_key=f"telegram:{name}",
        kind=ConversationKind.PUSH,
        channel="telegram",
        text=text,
        received_at=T0,
        turn_id="t",
        speaker=Speaker(name, handle),
        preceding=(PrecedingMessage(T0, name, text, handle),),
        route=ReplyRoute("telegram", values),
        viewing=viewing,
        continues=continues,
    )
    stored = encode_request(original)
    assert decode_request(stored) == original
    # A request that continues nothing is stored as before continuations existed.
    assert ("continues" in json.loads(stored)) == (continues is not None)


async def test_a_stored_turn_empties_the_chat_buffer_it_read_and_no_more(
    store: OpenStore,
) -> None:
    key = "telegram:-100"
    for text in ("one", "two"):
        await store.buffer.append(key, PrecedingMessage(T0, "Dana", text, "dana"), keep=50)
    read = await store.buffer.peek(key)
    await store.buffer.append(
        key, PrecedingMessage(T0, "Dana", "three", "dana"), keep=50
    )  # came later
    assert [m.text for m in read.messages] == ["one", "two"]
    turn = replace(request(1, key), preceding=read.messages)

    assert await store.inbox.accept(turn, source="tg", marks=["u1"], consumes=read.upto)
    assert [m.text for m in (await store.buffer.peek(key)).messages] == ["three"]
    # A redelivery stores nothing and empties nothing.
    later = await store.buffer.peek(key)
    assert await store.inbox.accept(turn, source="tg", marks=["u1"], consumes=later.upto) is None
    assert [m.text for m in (await store.buffer.peek(key)).messages] == ["three"]


@pytest.mark.both_engines
async def test_a_turn_the_full_disk_refuses_leaves_the_chat_buffer_whole(
    engine: Engine, store: OpenStore
) -> None:
    if engine.postgres:
        pytest.skip("a size-capped file is SQLite's; PostgreSQL's disk is the server's")
    key = "telegram:-100"
    await store.buffer.append(key, PrecedingMessage(T0, "Dana", "context", "dana"), keep=50)
    read = await store.buffer.peek(key)
    await fill(store)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        await store.inbox.accept(request(1, key), source="tg", marks=["u1"], consumes=read.upto)
    assert await store.buffer.peek(key) == read
    await make_room(store)
    assert await store.inbox.accept(request(1, key), source="tg", marks=["u1"], consumes=read.upto)
    assert (await store.buffer.peek(key)).messages == ()
