"""Long-term memory (SPEC §6): attributed captures, FTS5 BM25 recall under the privacy scope.

Each successful exchange becomes one row whose text names its speaker (`User (Alice Chen
(@alice)): ...` then `Assistant: ...`), with the surface it was heard in and the person who spoke.
Recall searches across conversations but only returns what the asking scope may hear:

- in a DM (`scope.private`): what that person said anywhere, plus everything captured in surfaces
  that person took part in (spoke in), which includes the DM itself;
- in a channel or group: only what was captured in that same surface;
- console and request-driven turns (`scope.surfaceless`): their own conversation, or everything
  when `memory.wide_console_recall` is set.

Hits are gated by score (an absolute floor and a share of the best hit's score) and bounded by
count and bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiosqlite
import structlog

from bot.config import MemorySettings
from bot.ports import MemoryCapture, MemoryHit, MemoryScope
from bot.store.codec import shorten
from bot.store.db import Database
from bot.store.fts import choose_terms, match_expression, query_terms, words

log = structlog.get_logger(__name__)

# What one memory keeps of each side of the exchange: a fact is usually said in a few sentences,
# and five hits must fit the 8 KiB recall budget with room to spare.
USER_TEXT_MAX_BYTES = 3 * 1024
ANSWER_MAX_BYTES = 2 * 1024

# Score gate (scores are FTS5 bm25 negated: larger is better). The floor drops matches on words
# present in most memories (FTS5 clamps the weight of a word in over half the rows to almost
# nothing); the relative gate drops weak tails that matched one incidental word of a many-word
# query. In a young memory every word is in "half the rows", so the floor waits for a corpus.
MIN_SCORE = 0.05
FLOOR_FROM_MEMORIES = 32
MIN_SHARE_OF_BEST = 0.25
MIN_HIT_BYTES = 256  # a last hit shortened below this says nothing; leave it out instead
# How often (in captures) the row bound is checked: counting on every capture would cost more
# than the overshoot it prevents.
RETENTION_EVERY = 100


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """One memory row as an operator sees it."""

    id: str
    conversation_key: str
    surface: str
    person: str | None
    text: str
    captured_at: datetime


def memory_text(item: MemoryCapture) -> str:
    """The attributed text of one exchange, as stored and recalled."""
    who = f"User ({item.speaker_label})" if item.speaker_label else "User"
    said = shorten(item.user_text.strip(), USER_TEXT_MAX_BYTES)
    answered = shorten(item.answer.strip(), ANSWER_MAX_BYTES)
    return f"{who}: {said}\nAssistant: {answered}"


class SqliteMemory:
    """The MemoryStore port, plus operator search and forget."""

    def __init__(self, db: Database, settings: MemorySettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock

    async def capture(self, item: MemoryCapture) -> None:
        if not self._settings.enabled or not (item.user_text.strip() or item.answer.strip()):
            return
        text = memory_text(item)
        captured_at = item.at.timestamp() if item.at else self._clock()

        async def capture(conn: aiosqlite.Connection) -> None:
            inserted = await conn.execute(
                """INSERT INTO memories (conversation_key, surface, person, text, captured_at)
                   VALUES (?, ?, ?, ?, ?)""",
                (item.conversation_key, item.surface, item.person, text, captured_at),
            )
            cursor_id = inserted.lastrowid or 0
            if item.person is not None:
                await conn.execute(
                    "INSERT OR IGNORE INTO participants (person, surface) VALUES (?, ?)",
                    (item.person, item.surface),
                )
            await conn.executemany(
                """INSERT INTO term_docs (term, docs) VALUES (?, 1)
                   ON CONFLICT (term) DO UPDATE SET docs = docs + 1""",
                [(word,) for word in words(text)],
            )
            if cursor_id % RETENTION_EVERY == 0:
                await _retain(conn, self._settings.max_entries)

        await self._db.write(capture)

    async def recall(self, query: str, scope: MemoryScope) -> list[MemoryHit]:
        settings = self._settings
        terms = query_terms(query)
        if not settings.enabled or settings.recall_hits == 0 or not terms:
            return []
        docs, corpus = await self._frequencies(terms)
        expression = match_expression(choose_terms(terms, docs, corpus))
        if expression is None:
            return []
        where, params = self._scope_filter(scope)
        rows = await self._db.fetch_all(
            f"""SELECT m.id, m.text, m.surface, m.captured_at, bm25(memories_fts) AS rank
                FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
                WHERE memories_fts MATCH ? AND {where}
                ORDER BY rank LIMIT ?""",
            (expression, *params, settings.recall_hits),
        )
        floor = MIN_SCORE if corpus >= FLOOR_FROM_MEMORIES else 0.0
        hits = _gated([_hit(row) for row in rows], floor)
        return _bounded(hits, settings.recall_max_bytes)

    async def _frequencies(self, terms: list[str]) -> tuple[dict[str, int], int]:
        """How many memories hold each term, and (about) how many memories there are."""
        marks = ", ".join("?" * len(terms))
        rows = await self._db.fetch_all(
            f"SELECT term, docs FROM term_docs WHERE term IN ({marks})", terms
        )
        # The highest id counts forgotten rows too; close enough for choosing query words.
        corpus = await self._db.fetch_one("SELECT coalesce(max(id), 0) FROM memories")
        return {row["term"]: int(row["docs"]) for row in rows}, int(corpus[0]) if corpus else 0

    def _scope_filter(self, scope: MemoryScope) -> tuple[str, tuple[Any, ...]]:
        if scope.surfaceless and self._settings.wide_console_recall:
            return "1", ()
        if scope.private and scope.person is not None:
            return (
                """(m.person = ? OR m.surface = ? OR m.surface IN
                       (SELECT surface FROM participants WHERE person = ?))""",
                (scope.person, scope.surface, scope.person),
            )
        return "m.surface = ?", (scope.surface,)

    async def search(self, query: str, *, limit: int = 20) -> list[StoredMemory]:
        """Operator search across every scope, best first, ungated."""
        expression = match_expression(query_terms(query))
        if expression is None:
            return []
        rows = await self._db.fetch_all(
            """SELECT m.* FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
               WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts) LIMIT ?""",
            (expression, limit),
        )
        return [_stored(row) for row in rows]

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory (and its index entry); True when it existed."""
        row_id = _row_id(memory_id)

        async def forget(conn: aiosqlite.Connection) -> bool:
            async with conn.execute(
                "DELETE FROM memories WHERE id = ? RETURNING text", (row_id,)
            ) as cursor:
                row = await cursor.fetchone()
            if row is None:
                return False
            gone = [(word,) for word in words(row["text"])]
            await conn.executemany("UPDATE term_docs SET docs = docs - 1 WHERE term = ?", gone)
            await conn.executemany("DELETE FROM term_docs WHERE term = ? AND docs <= 0", gone)
            return True

        return await self._db.write(forget)

    async def count(self) -> int:
        row = await self._db.fetch_one("SELECT count(*) FROM memories")
        return int(row[0]) if row else 0


async def _retain(conn: aiosqlite.Connection, limit: int) -> None:
    """Drop the oldest memories past `limit`, keeping the word counts in step."""
    async with conn.execute("SELECT count(*) FROM memories") as cursor:
        row = await cursor.fetchone()
    excess = (int(row[0]) if row else 0) - limit
    if excess <= 0:
        return
    async with conn.execute(
        """DELETE FROM memories WHERE id IN (SELECT id FROM memories ORDER BY id LIMIT ?)
           RETURNING text""",
        (excess,),
    ) as cursor:
        gone = [(word,) for row in await cursor.fetchall() for word in words(row["text"])]
    await conn.executemany("UPDATE term_docs SET docs = docs - 1 WHERE term = ?", gone)
    await conn.executemany("DELETE FROM term_docs WHERE term = ? AND docs <= 0", gone)
    log.info("memory_pruned", removed=excess)


def _row_id(memory_id: str) -> int:
    try:
        return int(memory_id)
    except ValueError:
        raise ValueError(
            f"memory id {memory_id!r} is not a number. Fix: use an id that "
            "`bot memory search` printed."
        ) from None


def _hit(row: Any) -> MemoryHit:
    return MemoryHit(
        id=str(row["id"]),
        text=row["text"],
        surface=row["surface"],
        score=-float(row["rank"]),
        captured_at=datetime.fromtimestamp(row["captured_at"], UTC),
    )


def _stored(row: Any) -> StoredMemory:
    return StoredMemory(
        id=str(row["id"]),
        conversation_key=row["conversation_key"],
        surface=row["surface"],
        person=row["person"],
        text=row["text"],
        captured_at=datetime.fromtimestamp(row["captured_at"], UTC),
    )


def _gated(hits: list[MemoryHit], floor: float) -> list[MemoryHit]:
    """Hits (best first) that clear `floor` and a share of the best hit's score."""
    if not hits:
        return []
    cut = max(floor, hits[0].score * MIN_SHARE_OF_BEST)
    return [hit for hit in hits if hit.score >= cut]


def _bounded(hits: list[MemoryHit], max_bytes: int) -> list[MemoryHit]:
    """Best hits first while they fit `max_bytes`; the one that overflows is shortened to the
    room left (when that room is worth a hit) and ends the list."""
    kept: list[MemoryHit] = []
    room = max_bytes
    for hit in hits:
        size = len(hit.text.encode("utf-8"))
        if size <= room:
            kept.append(hit)
            room -= size
            continue
        if room >= MIN_HIT_BYTES:
            kept.append(_with_text(hit, shorten(hit.text, room)))
        break
    return kept


def _with_text(hit: MemoryHit, text: str) -> MemoryHit:
    return MemoryHit(hit.id, text, hit.surface, hit.score, hit.captured_at)
