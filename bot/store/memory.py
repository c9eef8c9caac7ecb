"""Long-term memory (SPEC §6): attributed captures, FTS5 BM25 recall under the privacy scope.

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
window are excluded in the query (by source conversation and time), then `bot.sql.rules` holds
back what the preceding-messages fence carries, gates for relevance and bounds the hits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiosqlite
import structlog

from bot.config import MemorySettings
from bot.ports.memory import MemoryCapture, MemoryHit, MemoryScope, OwnMemory, RequestHolds
from bot.sql import rules
from bot.sql.codec import shorten
from bot.sql.terms import choose_terms, query_terms, words
from bot.store.db import Database
from bot.store.fts import match_expression

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
    return attributed(item)[0]


def attributed(item: MemoryCapture) -> tuple[str, int, int]:
    """The attributed text, and where the speaker's words start and end inside it."""
    who = f"User ({item.speaker_label})" if item.speaker_label else "User"
    said = shorten(item.user_text.strip(), USER_TEXT_MAX_BYTES)
    answered = shorten(item.answer.strip(), ANSWER_MAX_BYTES)
    start = len(who) + 2
    return f"{who}: {said}\nAssistant: {answered}", start, start + len(said)


class SqliteMemory:
    """The MemoryStore port, plus operator search and forget."""

    def __init__(self, db: Database, settings: MemorySettings, clock: Callable[[], float]):
        self._db = db
        self._settings = settings
        self._clock = clock
        self._window = settings.participation_window_hours * 3600

    async def capture(self, item: MemoryCapture) -> None:
        if not self._settings.enabled or not (item.user_text.strip() or item.answer.strip()):
            return
        text, said_from, said_to = attributed(item)
        captured_at = item.at.timestamp() if item.at else self._clock()

        async def capture(conn: aiosqlite.Connection) -> None:
            inserted = await conn.execute(
                """INSERT INTO memories (conversation_key, surface, person, text, captured_at,
                                         turn_id, said_from, said_to)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    item.conversation_key,
                    item.surface,
                    item.person,
                    text,
                    captured_at,
                    item.turn_id,
                    said_from,
                    said_to,
                ),
            )
            cursor_id = inserted.lastrowid or 0
            if item.person is not None:
                await self._took_part(conn, item.person, item.surface, captured_at)
            await conn.executemany(
                """INSERT INTO term_docs (term, docs) VALUES (?, 1)
                   ON CONFLICT (term) DO UPDATE SET docs = docs + 1""",
                [(word,) for word in words(text)],
            )
            if cursor_id % RETENTION_EVERY == 0:
                await _retain(conn, self._settings.max_entries)

        await self._db.write(capture)

    async def _took_part(
        self, conn: aiosqlite.Connection, person: str, surface: str, at: float
    ) -> None:
        """Extend the person's latest span there when its window touches `at`, else open one."""
        async with conn.execute(
            """SELECT id, since, until FROM participation WHERE person = ? AND surface = ?
               ORDER BY until DESC LIMIT 1""",
            (person, surface),
        ) as cursor:
            row = await cursor.fetchone()
        if (
            row is not None
            and row["since"] - 2 * self._window <= at <= row["until"] + 2 * self._window
        ):
            await conn.execute(
                "UPDATE participation SET since = min(since, ?), until = max(until, ?)"
                " WHERE id = ?",
                (at, at, row["id"]),
            )
            return
        await conn.execute(
            "INSERT INTO participation (person, surface, since, until) VALUES (?, ?, ?, ?)",
            (person, surface, at, at),
        )

    async def left(self, person: str, surface: str, at: datetime) -> None:
        async def end(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "DELETE FROM participation WHERE person = ? AND surface = ? AND since <= ?",
                (person, surface, at.timestamp()),
            )

        await self._db.write(end)
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
        expression = match_expression(choose_terms(specific, docs, corpus))
        if expression is None:
            return []
        where, params = self._scope_filter(scope)
        held, held_params = _held_filter(holds)
        rows = await self._db.fetch_all(
            f"""SELECT m.id, m.text, m.surface, m.captured_at, m.said_from, m.said_to,
                       bm25(memories_fts) AS rank
                FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
                WHERE memories_fts MATCH ? AND {where} AND {held}
                ORDER BY rank LIMIT ?""",
            (expression, *params, *held_params, settings.recall_hits * CANDIDATES_PER_HIT),
        )
        return rules.select(
            [_hit(row) for row in rows],
            specific,
            rules.weights(specific, docs, corpus),
            holds.preceding,
            max_hits=settings.recall_hits,
            max_bytes=settings.recall_max_bytes,
        )

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
                """(m.person = ? OR m.surface = ? OR EXISTS (
                       SELECT 1 FROM participation p
                       WHERE p.person = ? AND p.surface = m.surface
                         AND m.captured_at BETWEEN p.since - ? AND p.until + ?))""",
                (scope.person, scope.surface, scope.person, self._window, self._window),
            )
        return "m.surface = ?", (scope.surface,)

    async def own(self, person: str, scope: MemoryScope, limit: int) -> tuple[list[OwnMemory], int]:
        where, params = _own_filter(person, scope)
        total = await self._db.fetch_one(f"SELECT count(*) FROM memories m WHERE {where}", params)
        rows = await self._db.fetch_all(
            f"""SELECT m.id, m.text, m.said_from, m.said_to, m.captured_at FROM memories m
                WHERE {where} ORDER BY m.captured_at DESC, m.id DESC LIMIT ?""",
            (*params, limit),
        )
        own = [
            OwnMemory(
                str(row["id"]),
                _said(row) or row["text"],
                datetime.fromtimestamp(row["captured_at"], UTC),
            )
            for row in rows
        ]
        return own, int(total[0]) if total else 0

    async def forget_own(
        self, person: str, scope: MemoryScope, ids: Sequence[str] | None = None
    ) -> int:
        where, params = _own_filter(person, scope)
        if ids is not None:
            numbers = [_row_id(memory_id) for memory_id in ids]
            if not numbers:
                return 0
            where += f" AND m.id IN ({', '.join('?' * len(numbers))})"
            params = (*params, *numbers)

        async def forget(conn: aiosqlite.Connection) -> int:
            async with conn.execute(
                f"DELETE FROM memories AS m WHERE {where} RETURNING text", params
            ) as cursor:
                gone = list(await cursor.fetchall())
            await _uncount(conn, [row["text"] for row in gone])
            return len(gone)

        return await self._db.write(forget)

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
            await _uncount(conn, [row["text"]])
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
        await _uncount(conn, [row["text"] for row in await cursor.fetchall()])
    log.info("memory_pruned", removed=excess)


async def _uncount(conn: aiosqlite.Connection, texts: Sequence[str]) -> None:
    """Keep the word counts in step with deleted memories."""
    gone = [(word,) for text in texts for word in words(text)]
    await conn.executemany("UPDATE term_docs SET docs = docs - 1 WHERE term = ?", gone)
    await conn.executemany("DELETE FROM term_docs WHERE term = ? AND docs <= 0", gone)


def _held_filter(holds: RequestHolds) -> tuple[str, tuple[Any, ...]]:
    """SQL leaving out memories of the replayed history window (source conversation and time)."""
    if holds.conversation_key is None or holds.history_since is None:
        return "1", ()
    return (
        "NOT (m.conversation_key = ? AND m.captured_at >= ?)",
        (holds.conversation_key, holds.history_since.timestamp()),
    )


def _own_filter(person: str, scope: MemoryScope) -> tuple[str, tuple[Any, ...]]:
    """The person's own memories as a scope shows them: all of them in a DM, else this surface's."""
    if scope.private:
        return "m.person = ?", (person,)
    return "m.person = ? AND m.surface = ?", (person, scope.surface)


def _said(row: Any) -> str:
    text: str = row["text"]
    return text[row["said_from"] : row["said_to"]] if row["said_to"] else ""


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
        said=_said(row),
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
