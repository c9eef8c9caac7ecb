"""Long-term memory (SPEC §6): attributed captures, full-text recall under the privacy scope.

Each successful exchange becomes one row whose text names its speaker (`User (Alice Chen
(@alice)): ...` then `Assistant: ...`), with the surface it was heard in and the person who spoke.
Recall searches across conversations but only returns what the asking scope may hear:

- in a DM (`scope.private`): what that person said anywhere, the DM itself, and what others said
  in surfaces that person took part in, within `memory.participation_window_hours` of one of
  their own messages there (participation is kept as spans of time in `participation`, merged
  while the windows touch, and ended by `left` when the platform says they left);
- in a channel or group: only what was captured in that same surface;
- console and request-driven turns (`scope.surfaceless`): their own conversation, or everything
  when `memory.wide_console_recall` is set.

Recall never repeats the request: memories captured in this conversation's replayed history
window are excluded in the query (by source conversation and time), then `bot.store.sql.rules` holds
back what the preceding-messages fence carries, gates for relevance and bounds the hits. Only the
search itself is the engine's own (`FullText`: SQLite's FTS5 BM25, PostgreSQL's tsvector rank).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from bot.config import MemorySettings
from bot.ports.memory import (
    MemoryCapture,
    MemoryHit,
    MemoryScope,
    OwnMemory,
    RequestHolds,
    StoredMemory,
)
from bot.ports.sql import Row, Sql, SqlDatabase
from bot.store.sql import rules
from bot.store.sql.codec import shorten
from bot.store.sql.conn import marks
from bot.store.sql.terms import choose_terms, query_terms, words
from bot.turns import Origin

log = structlog.get_logger(__name__)

# What one memory keeps of each side of the exchange: a fact is usually said in a few sentences,
# and five hits must fit the 8 KiB recall budget with room to spare.
USER_TEXT_MAX_BYTES = 3 * 1024
ANSWER_MAX_BYTES = 2 * 1024

# Candidates read per recall, as a multiple of memory.recall_hits: the gate and the fence
# hold-back run after the query, and the bound applies to what is left.
CANDIDATES_PER_HIT = 4
# How often (in captures) the row bound is checked: counting on every capture would cost more
# than the overshoot it prevents.
RETENTION_EVERY = 100


def _as_is(text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class FullText:
    """How an engine finds memories by their words: the one part of memory that differs.

    The search reads `FROM {source} WHERE {match}`, the memories as `m`; the engine's query
    (`query(terms)`) is the one `?` of `source` and `match` together."""

    query: Callable[[list[str]], str | None]  # OR-ing the words; None when there are none
    source: str
    match: str
    score: str  # how well `m` matches: higher is better
    storable: Callable[[str], str] = _as_is  # text as the engine can hold it


def memory_text(item: MemoryCapture) -> str:
    """The attributed text of one exchange, as stored and recalled."""
    return attributed(item)[0]


def attributed(item: MemoryCapture) -> tuple[str, int, int]:
    """The attributed text, and where the speaker's words start and end inside it."""
    who = f"User ({item.speaker_label})" if item.speaker_label else "User"
    said = shorten(item.user_text.strip(), USER_TEXT_MAX_BYTES)
    answered = shorten(item.answer.strip(), ANSWER_MAX_BYTES)
    start = len(who) + 2
    return f"{who}: {said}\nAssistant: {answered}", start, start + len(said)


class SqlMemory:
    """The MemoryStore port, plus operator search and forget."""

    def __init__(
        self,
        db: SqlDatabase,
        search: FullText,
        settings: MemorySettings,
        clock: Callable[[], float],
    ):
        self._db = db
        self._fts = search
        self._settings = settings
        self._clock = clock
        self._window = settings.participation_window_hours * 3600

    async def capture(self, item: MemoryCapture) -> None:
        await self._db.transaction(lambda tx: self.capture_in(tx, item))

    async def capture_in(self, tx: Sql, item: MemoryCapture) -> None:
        """Capture inside the caller's write transaction (a turn's publication)."""
        if not self._settings.enabled or not (item.user_text.strip() or item.answer.strip()):
            return
        storable = self._fts.storable
        text, said_from, said_to = attributed(item)
        text = storable(text)
        captured_at = item.at.timestamp() if item.at else self._clock()
        person = None if item.person is None else storable(item.person)
        surface = storable(item.surface)
        row_id = await tx.fetch_value(
            """INSERT INTO memories (conversation_key, surface, person, text, captured_at,
                                     turn_id, said_from, said_to, origin)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
            storable(item.conversation_key),
            surface,
            person,
            text,
            captured_at,
            item.turn_id,
            said_from,
            said_to,
            item.origin.value,
        )
        if person is not None:
            await self._took_part(tx, person, surface, captured_at)
        # Sorted, so concurrent captures take the word rows' locks in one order.
        await tx.execute_many(
            """INSERT INTO term_docs (term, docs) VALUES (?, 1)
               ON CONFLICT (term) DO UPDATE SET docs = term_docs.docs + 1""",
            [(word,) for word in sorted(words(text))],
        )
        if int(row_id) % RETENTION_EVERY == 0:
            await _retain(tx, self._settings.max_entries)

    async def _took_part(self, tx: Sql, person: str, surface: str, at: float) -> None:
        """Extend the person's latest span there when its window touches `at`, else open one."""
        await tx.lock(_participation(person, surface))
        row = await tx.fetch_one(
            """SELECT id, since, until FROM participation WHERE person = ? AND surface = ?
               ORDER BY until DESC LIMIT 1""",
            person,
            surface,
        )
        reach = 2 * self._window
        if row is not None and row["since"] - reach <= at <= row["until"] + reach:
            await tx.execute(
                "UPDATE participation SET since = ?, until = ? WHERE id = ?",
                min(row["since"], at),
                max(row["until"], at),
                row["id"],
            )
            return
        await tx.execute(
            "INSERT INTO participation (person, surface, since, until) VALUES (?, ?, ?, ?)",
            person,
            surface,
            at,
            at,
        )

    async def left(self, person: str, surface: str, at: datetime) -> None:
        async def end(tx: Sql) -> None:
            await tx.lock(_participation(person, surface))
            await tx.execute(
                "DELETE FROM participation WHERE person = ? AND surface = ? AND since <= ?",
                person,
                surface,
                at.timestamp(),
            )

        await self._db.transaction(end)
        log.info("memory_participation_ended")

    async def recall(
        self, query: str, scope: MemoryScope, holds: RequestHolds | None = None
    ) -> list[MemoryHit]:
        settings = self._settings
        holds = holds or RequestHolds()
        terms = query_terms(query)
        if not settings.enabled or settings.recall_hits == 0 or not terms:
            return []
        docs, corpus = await self._frequencies(terms)
        specific = rules.specific_terms(terms, docs, corpus)
        expression = self._fts.query(choose_terms(specific, docs, corpus))
        if expression is None:
            return []
        where, params = self._scope_filter(scope)
        held, held_params = _held_filter(holds)
        fts = self._fts
        rows = await self._db.reads().fetch_all(
            f"""SELECT m.id, m.text, m.surface, m.captured_at, m.said_from, m.said_to,
                       m.origin, m.person, {fts.score} AS score
                FROM {fts.source} WHERE {fts.match} AND {where} AND {held}
                ORDER BY score DESC, m.id DESC LIMIT ?""",
            expression,
            *params,
            *held_params,
            settings.recall_hits * CANDIDATES_PER_HIT,
        )
        return rules.select(
            [_hit(row, scope.person) for row in rows],
            specific,
            rules.weights(specific, docs, corpus),
            holds.preceding,
            max_hits=settings.recall_hits,
            max_bytes=settings.recall_max_bytes,
        )

    async def _frequencies(self, terms: list[str]) -> tuple[dict[str, int], int]:
        """How many memories hold each term, and (about) how many memories there are."""
        reads = self._db.reads()
        rows = await reads.fetch_all(
            f"SELECT term, docs FROM term_docs WHERE term IN ({marks(terms)})", *terms
        )
        # The highest id counts forgotten rows too; close enough for choosing query words.
        corpus = await reads.fetch_value("SELECT coalesce(max(id), 0) FROM memories")
        return {row["term"]: int(row["docs"]) for row in rows}, int(corpus or 0)

    def _scope_filter(self, scope: MemoryScope) -> tuple[str, tuple[Any, ...]]:
        if scope.surfaceless and self._settings.wide_console_recall:
            return "TRUE", ()
        if scope.private and scope.person is not None:
            return (
                """(m.person = ? OR m.surface = ? OR EXISTS (
                       SELECT 1 FROM participation p
                       WHERE p.person = ? AND p.surface = m.surface
                         AND m.captured_at BETWEEN p.since - ? AND p.until + ?))""",
                (scope.person, scope.surface, scope.person, self._window, self._window),
            )
        return "m.surface = ?", (scope.surface,)

    async def own(self, person: str, scope: MemoryScope, limit: int) -> tuple[list[OwnMemory], int]:
        where, params = _own_filter(person, scope)
        reads = self._db.reads()
        total = await reads.fetch_value(f"SELECT count(*) FROM memories m WHERE {where}", *params)
        rows = await reads.fetch_all(
            f"""SELECT m.id, m.text, m.said_from, m.said_to, m.captured_at, m.origin
                FROM memories m
                WHERE {where} ORDER BY m.captured_at DESC, m.id DESC LIMIT ?""",
            *params,
            limit,
        )
        own = [
            OwnMemory(
                str(row["id"]),
                _said(row) or row["text"],
                datetime.fromtimestamp(row["captured_at"], UTC),
                origin_named(row["origin"]),
            )
            for row in rows
        ]
        return own, int(total or 0)

    async def forget_own(
        self, person: str, scope: MemoryScope, ids: Sequence[str] | None = None
    ) -> int:
        where, params = _own_filter(person, scope)
        if ids is not None:
            numbers = [memory_row_id(memory_id) for memory_id in ids]
            if not numbers:
                return 0
            where += f" AND m.id IN ({marks(numbers)})"
            params = (*params, *numbers)

        async def forget(tx: Sql) -> int:
            gone = await tx.fetch_all(
                f"DELETE FROM memories AS m WHERE {where} RETURNING text", *params
            )
            await _uncount(tx, [row["text"] for row in gone])
            return len(gone)

        return await self._db.transaction(forget)

    async def search(self, query: str, *, limit: int = 20) -> list[StoredMemory]:
        """Operator search across every scope, best first, ungated."""
        fts = self._fts
        expression = fts.query(query_terms(query))
        if expression is None:
            return []
        rows = await self._db.reads().fetch_all(
            f"""SELECT m.* FROM {fts.source} WHERE {fts.match}
                ORDER BY {fts.score} DESC, m.id DESC LIMIT ?""",
            expression,
            limit,
        )
        return [_stored(row) for row in rows]

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory (and its index entry); True when it existed."""
        row_id = memory_row_id(memory_id)

        async def forget(tx: Sql) -> bool:
            text = await tx.fetch_value("DELETE FROM memories WHERE id = ? RETURNING text", row_id)
            if text is None:
                return False
            await _uncount(tx, [text])
            return True

        return await self._db.transaction(forget)

    async def count(self) -> int:
        return int(await self._db.reads().fetch_value("SELECT count(*) FROM memories") or 0)


async def _retain(tx: Sql, limit: int) -> None:
    """Drop the oldest memories past `limit`, keeping the word counts in step."""
    excess = int(await tx.fetch_value("SELECT count(*) FROM memories") or 0) - limit
    if excess <= 0:
        return
    rows = await tx.fetch_all(
        """DELETE FROM memories WHERE id IN (SELECT id FROM memories ORDER BY id LIMIT ?)
           RETURNING text""",
        excess,
    )
    await _uncount(tx, [row["text"] for row in rows])
    log.info("memory_pruned", removed=excess)


async def _uncount(tx: Sql, texts: Sequence[str]) -> None:
    """One fewer memory holds each word of each deleted text (in one order, as `capture`)."""
    gone = sorted(word for text in texts for word in words(text))
    await tx.execute_many(
        "UPDATE term_docs SET docs = docs - 1 WHERE term = ?", [(w,) for w in gone]
    )
    await tx.execute_many(
        "DELETE FROM term_docs WHERE term = ? AND docs <= 0", [(w,) for w in sorted(set(gone))]
    )


def _held_filter(holds: RequestHolds) -> tuple[str, tuple[Any, ...]]:
    """SQL leaving out memories of the replayed history window (source conversation and time)."""
    if holds.conversation_key is None or holds.history_since is None:
        return "TRUE", ()
    return (
        "NOT (m.conversation_key = ? AND m.captured_at >= ?)",
        (holds.conversation_key, holds.history_since.timestamp()),
    )


def _own_filter(person: str, scope: MemoryScope) -> tuple[str, tuple[Any, ...]]:
    """The person's own memories as a scope shows them: all of them in a DM, else this surface's."""
    if scope.private:
        return "m.person = ?", (person,)
    return "m.person = ? AND m.surface = ?", (person, scope.surface)


def _participation(person: str, surface: str) -> str:
    return f"participation:{person}\n{surface}"


def _said(row: Row) -> str:
    text: str = row["text"]
    return text[row["said_from"] : row["said_to"]] if row["said_to"] else ""


_ROW_ID_MAX = 2**63 - 1  # the largest row id either engine stores (a signed 64-bit integer)


def memory_row_id(memory_id: str) -> int:
    try:
        number = int(memory_id)
    except ValueError:
        raise ValueError(
            f"memory id {memory_id!r} is not a number. Fix: use an id that "
            "`bot memory search` printed."
        ) from None
    if not 1 <= number <= _ROW_ID_MAX:
        raise ValueError(
            f"memory id {memory_id} is out of range (ids run from 1 to {_ROW_ID_MAX}). "
            "Fix: use an id that `bot memory search` printed."
        )
    return number


def _hit(row: Row, reader: str | None) -> MemoryHit:
    return MemoryHit(
        id=str(row["id"]),
        text=row["text"],
        surface=row["surface"],
        score=float(row["score"]),
        captured_at=datetime.fromtimestamp(row["captured_at"], UTC),
        said=_said(row),
        origin=origin_named(row["origin"]),
        own=reader is not None and row["person"] == reader,
        answer_at=int(row["said_to"]),
    )


def origin_named(stored: object) -> Origin:
    """A stored origin; one this program does not know reads as the least trusted person's."""
    try:
        return Origin(str(stored))
    except ValueError:
        return Origin.UNLISTED


def _stored(row: Row) -> StoredMemory:
    return StoredMemory(
        id=str(row["id"]),
        conversation_key=row["conversation_key"],
        surface=row["surface"],
        person=row["person"],
        text=row["text"],
        captured_at=datetime.fromtimestamp(row["captured_at"], UTC),
        origin=origin_named(row["origin"]),
    )
