"""Recall quality on a labelled fixture, at a young store size and in a grown store; hold-back of
what the request already carries; the engine-neutral rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.ports.memory import MemoryCapture, MemoryHit, MemoryScope, RequestHolds
from bot.ports.stores import OpenStore
from bot.store.sql.rules import bounded, in_fence, specific_terms, stem
from tests.store.sqlite.recall_labels import CHATTER, MEMORIES, QUERIES

pytestmark = pytest.mark.all_engines

SURFACE = "slack:C_TEAM"
SCOPE = MemoryScope(SURFACE, person="slack:T1:U_ASKER")
AT = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
# Ordinary chat of a grown store: many exchanges, none of them about the fixture's facts.
FILLER = [
    "can you summarize the thread about the design review",
    "please draft a reply to the customer about the delay",
    "what does this error in the build log mean",
    "rewrite this paragraph so it sounds friendlier",
    "list the open questions from yesterday's meeting",
    "translate this sentence into German for the newsletter",
]


async def remember(store: OpenStore, key: str, said: str, answer: str, n: int) -> None:
    await store.memory.capture(
        MemoryCapture(
            conversation_key=f"{SURFACE}:{key}",
            surface=SURFACE,
            person="slack:T1:U_TELLER",
            speaker_label="Teller (@teller)",
            user_text=said,
            answer=answer,
            at=AT + timedelta(minutes=n),
            turn_id=f"turn-{key}",
        )
    )


async def labelled_store(store: OpenStore, filler: int) -> dict[str, str]:
    """Capture the fixture (after `filler` ordinary exchanges); map memory text to its key."""
    for n in range(filler):
        said = f"{FILLER[n % len(FILLER)]} (request {n})"
        await remember(store, f"filler-{n}", said, "Here you go.", n)
    keys = {}
    for n, (key, (said, answer)) in enumerate(MEMORIES.items()):
        await remember(store, key, said, answer, filler + n)
        keys[f"{said}\n{answer}"] = key
    return keys


async def measure(store: OpenStore, keys: dict[str, str]) -> tuple[float, float, int]:
    """Precision and recall over the labelled queries, and hits returned for chatter."""
    true_positives = fine = returned = wanted = 0
    for query, want, ok in QUERIES:
        got = {_key(hit, keys) for hit in await store.memory.recall(query, SCOPE)}
        true_positives += len(got & want)
        fine += len(got & (want | ok))
        returned += len(got)
        wanted += len(want)
        if not want <= got or not got <= want | ok:
            print(f"  {query!r}: got {sorted(got)}, want {sorted(want)}, ok {sorted(ok)}")
    chatter = 0
    for query in CHATTER:
        chatter += len(await store.memory.recall(query, SCOPE))
    return fine / max(returned, 1), true_positives / wanted, chatter


def _key(hit: MemoryHit, keys: dict[str, str]) -> str:
    body = hit.text.split(": ", 1)[1].replace("\nAssistant: ", "\n")
    return keys.get(body, "filler")


async def test_labelled_fixture_in_a_young_store(store: OpenStore) -> None:
    precision, recall, chatter = await measure(store, await labelled_store(store, 0))
    print(f"young store ({len(MEMORIES)} memories): precision {precision:.2f}, recall {recall:.2f}")
    assert chatter == 0, "chatter-only queries recall nothing"
    assert precision >= 0.9
    assert recall >= 0.8


async def test_labelled_fixture_in_a_grown_store(store: OpenStore) -> None:
    precision, recall, chatter = await measure(store, await labelled_store(store, 300))
    size = len(MEMORIES) + 300
    print(f"grown store ({size} memories): precision {precision:.2f}, recall {recall:.2f}")
    assert chatter == 0
    assert precision >= 0.9
    assert recall >= 0.8


async def test_a_memory_in_the_replayed_history_window_is_held_back(store: OpenStore) -> None:
    await labelled_store(store, 0)
    key = f"{SURFACE}:badge"
    badge_at = AT + timedelta(minutes=list(MEMORIES).index("badge"))

    in_window = RequestHolds(conversation_key=key, history_since=badge_at)
    earlier = RequestHolds(conversation_key=key, history_since=badge_at + timedelta(seconds=1))
    elsewhere = RequestHolds(conversation_key=f"{SURFACE}:other", history_since=AT)

    assert await store.memory.recall("badge number", SCOPE, in_window) == []
    assert await store.memory.recall("badge number", SCOPE, earlier)
    assert await store.memory.recall("badge number", SCOPE, elsewhere)


async def test_a_memory_already_in_the_preceding_fence_is_held_back(store: OpenStore) -> None:
    await labelled_store(store, 0)
    fence = ("Some chatter first", "  my BADGE number is 7731,   I sit on floor 4.  ")

    assert await store.memory.recall("badge number", SCOPE, RequestHolds(preceding=fence)) == []
    other = RequestHolds(preceding=("my badge is somewhere in my bag",))
    assert await store.memory.recall("badge number", SCOPE, other)


async def test_held_back_hits_leave_room_for_the_next_best(store: OpenStore) -> None:
    for n in range(8):
        await remember(store, f"k{n}", f"kubernetes upgrade step {n} for the cluster", "Ok.", n)
    since = AT + timedelta(minutes=5)
    holds = RequestHolds(conversation_key=f"{SURFACE}:k7", history_since=since)

    hits = await store.memory.recall("kubernetes upgrade cluster", SCOPE, holds)

    assert len(hits) == 5, "the bound applies after what the request holds is left out"
    assert all("step 7" not in hit.text for hit in hits)


def test_chatter_and_common_words_are_not_specific() -> None:
    assert specific_terms(["today", "badge"], {}, 5) == ["badge"]
    # Once the store is big enough to tell, a word in a fifth of it is common.
    assert specific_terms(["deploy", "badge"], {"deploy": 30, "badge": 2}, 100) == ["badge"]
    # A young store cannot tell: every word counts.
    assert specific_terms(["deploy"], {"deploy": 5}, 5) == ["deploy"]


def test_stems_match_inflections() -> None:
    assert stem("deploys") == stem("deployed") == stem("deploying") == stem("deploy")


def test_in_fence_ignores_short_words() -> None:
    assert not in_fence("ok", ["ok thanks"])
    assert in_fence("the badge number is 7731", ["Bob: The  badge number is 7731!"])


@given(
    st.lists(st.text(max_size=3000), max_size=12),
    st.integers(min_value=0, max_value=20_000),
)
def test_bounded_never_exceeds_the_byte_budget(texts: list[str], budget: int) -> None:
    hits = [MemoryHit(str(n), text, "s", 1.0, AT) for n, text in enumerate(texts)]
    kept = bounded(hits, budget)
    assert sum(len(hit.text.encode()) for hit in kept) <= budget
    assert [hit.id for hit in kept] == [hit.id for hit in hits[: len(kept)]]
