"""SqliteStore benchmark (SPEC §12): publish and recall latency at 10,000 conversations and 100,000
memories, and the database size.

    .venv/bin/python -m benchmarks.store [--conversations N] [--memories N] [--samples N]

The corpus is built straight into the schema (one bulk transaction; the FTS index is kept by the
same triggers the store uses), then every measured call goes through the store's public API, as
the host makes it. Text is synthetic but shaped like chat: Zipf-distributed words from a large
vocabulary, a few hundred surfaces, a few thousand people. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from bot.config import MemorySettings, StoreSettings
from bot.ports.memory import MemoryCapture, MemoryScope
from bot.store.sql.codec import encode_entry
from bot.store.sql.memory import attributed
from bot.store.sql.terms import STOPWORDS
from bot.store.sql.terms import words as index_words
from bot.store.sqlite import SqliteStore, open_store
from bot.turns import HistoryEntry, TextBlock, ToolResultBlock, ToolUseBlock

SURFACES = 400
PEOPLE = 3000
VOCABULARY = 30_000


class Words:
    """Deterministic chat-like text: words drawn with Zipf frequencies, where, as in English, the
    most frequent ranks are function words (the store's stopwords) and the rest are made-up
    syllable words."""

    def __init__(self, rng: random.Random) -> None:
        syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
        made_up = ("".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in itertools.count())
        head = sorted(STOPWORDS)
        self.vocabulary = head + list(itertools.islice(made_up, VOCABULARY - len(head)))
        self.weights = list(itertools.accumulate(1.0 / rank for rank in range(1, VOCABULARY + 1)))
        self.rng = rng

    def sentence(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        return " ".join(self.rng.choices(self.vocabulary, cum_weights=self.weights, k=count))


def turn_entries(words: Words, speaker: str) -> list[HistoryEntry]:
    call = f"toolu_{words.rng.getrandbits(48):012x}"
    return [
        HistoryEntry("user", (TextBlock(words.sentence(8, 40)),), speaker=speaker, tokens=40),
        HistoryEntry("assistant", (ToolUseBlock(call, "memory_recall", {"query": "x y"}),)),
        HistoryEntry("user", (ToolResultBlock(call, words.sentence(20, 80)),)),
        HistoryEntry("assistant", (TextBlock(words.sentence(30, 150)),), tokens=120),
    ]


def build_corpus(path: Path, conversations: int, memories: int, words: Words) -> None:
    rng = words.rng
    now = time.time()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for n in range(conversations):
        key = f"slack:T1:C{n % SURFACES}:{n}.0"
        bodies = [encode_entry(e) for e in turn_entries(words, "Someone (@someone)") * 2]
        conn.executemany(
            "INSERT INTO messages (key, seq, body) VALUES (?, ?, ?)",
            [(key, seq, body) for seq, body in enumerate(bodies)],
        )
        size = sum(len(body.encode()) for body in bodies)
        conn.execute(
            "INSERT INTO conversations (key, last_active, bytes, next_seq) VALUES (?, ?, ?, ?)",
            (key, now - rng.uniform(0, 30 * 86_400), size, len(bodies)),
        )
    rows = []
    term_docs: Counter[str] = Counter()
    spans: dict[tuple[str, str], tuple[float, float]] = {}
    for n in range(memories):
        surface = f"slack:C{rng.randrange(SURFACES)}"
        person = f"slack:T1:U{rng.randrange(PEOPLE)}"
        at = now - n
        since, until = spans.get((person, surface), (at, at))
        spans[person, surface] = (min(since, at), max(until, at))
        item = MemoryCapture(
            f"{surface}:{n}.0",
            surface,
            person,
            f"Person {person[-4:]} (@p{person[-4:]})",
            words.sentence(6, 40),
            words.sentence(10, 60),
            None,  # type: ignore[arg-type]  # attributed() does not read the time
        )
        text, said_from, said_to = attributed(item)
        term_docs.update(index_words(text))
        rows.append(
            (item.conversation_key, surface, person, text, at, f"turn-{n}", said_from, said_to)
        )
    conn.executemany(
        "INSERT INTO memories (conversation_key, surface, person, text, captured_at, turn_id,"
        " said_from, said_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO participation (person, surface, since, until) VALUES (?, ?, ?, ?)",
        [(person, surface, since, until) for (person, surface), (since, until) in spans.items()],
    )
    conn.executemany("INSERT INTO term_docs VALUES (?, ?)", term_docs.items())
    conn.execute("COMMIT")
    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def timed(samples: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    times = []
    for n in range(samples):
        start = time.perf_counter()
        await call(n)
        times.append((time.perf_counter() - start) * 1000)
    return times


def report(name: str, times: list[float]) -> None:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(
        f"  {name:<34} p50 {statistics.median(ordered):7.2f} ms   p99 {p99:7.2f} ms"
        f"   (n={len(ordered)})"
    )


async def measure(store: SqliteStore, words: Words, conversations: int, samples: int) -> None:
    rng = words.rng
    keys = [f"slack:T1:C{n % SURFACES}:{n}.0" for n in range(conversations)]
    queries = [words.sentence(4, 20) for _ in range(samples)]
    turns = [turn_entries(words, "Alice (@alice)") for _ in range(samples)]

    async def publish(n: int) -> None:
        await store.history.publish(rng.choice(keys), turns[n])

    async def load(n: int) -> None:
        await store.history.load(rng.choice(keys))

    def recall_in(scope: Callable[[], MemoryScope]) -> Callable[[int], Awaitable[object]]:
        async def recall(n: int) -> None:
            await store.memory.recall(queries[n], scope())

        return recall

    def channel() -> MemoryScope:
        return MemoryScope(f"slack:C{rng.randrange(SURFACES)}")

    def dm() -> MemoryScope:
        person = f"slack:T1:U{rng.randrange(PEOPLE)}"
        return MemoryScope(f"slack:D{rng.randrange(PEOPLE)}", person=person, private=True)

    def wide() -> MemoryScope:
        return MemoryScope("console:bench", surfaceless=True)

    report("publish (one 4-message turn)", await timed(samples, publish))
    report("load (one conversation)", await timed(samples, load))
    report("recall, channel scope", await timed(samples, recall_in(channel)))
    report("recall, DM scope", await timed(samples, recall_in(dm)))
    report("recall, every scope (wide console)", await timed(samples, recall_in(wide)))
    hits = [len(await store.memory.recall(q, channel())) for q in queries[:200]]
    print(f"  recall hits per channel query: mean {statistics.mean(hits):.2f} (of at most 5)")


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir())


async def run(conversations: int, memories: int, samples: int, seed: int) -> None:
    words = Words(random.Random(seed))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.sqlite3"
        store = await open_store(StoreSettings(path=path), MemorySettings(wide_console_recall=True))
        await store.aclose()
        start = time.perf_counter()
        build_corpus(path, conversations, memories, words)
        print(
            f"store benchmark: {conversations:,} conversations, {memories:,} memories "
            f"(built in {time.perf_counter() - start:.1f} s), {samples} samples each"
        )
        store = await open_store(StoreSettings(path=path), MemorySettings(wide_console_recall=True))
        try:
            await measure(store, words, conversations, samples)
        finally:
            await store.aclose()
        print(f"  database size: {folder_bytes(Path(folder)) / 1024 / 1024:.1f} MiB (with WAL)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=20250301)
    options = parser.parse_args(argv)
    asyncio.run(run(options.conversations, options.memories, options.samples, options.seed))


if __name__ == "__main__":
    main()
