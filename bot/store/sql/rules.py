"""What recall may return, whatever the engine: the relevance gate, hold-back and bounds (SPEC §6).

Every memory store (SQLite here, PostgreSQL beside it) finds candidates its own way (FTS5 BM25,
full-text search), best first, already within the privacy scope and without what the replayed
history holds, then hands them to `select`, which applies, in order:

1. **hold-back by the fence**: a memory whose speaker's words are already one of this turn's
   preceding messages is left out (the request carries them);
2. **the relevance gate**, at every store size: a hit must contain enough of the query's
   *specific* terms. A term is specific when it is no stopword or chatter word and (once the
   store is big enough to tell) is not common in the store. A query with up to three specific
   terms needs one of them, a longer one two; and a hit that matches only one term must match
   more than half of the query's weight (terms weighed by rarity in the store, among those the
   store holds at all), so "heron budget" does not bring back every budget. A chatter-only query
   has no specific term, so it recalls nothing. Among the hits that pass, weak tails (under a
   share of the best score) are dropped;
3. **the bounds**: at most `max_hits`, then at most `max_bytes` of text (the hit that overflows
   is shortened to the room left when that room is worth a hit, and ends the list).

Matching is on light stems (`stem`), so "deploys" and "deployed" count for "deploy" the way the
index's own stemmer finds them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from bot.ports.memory import MemoryHit
from bot.store.sql.codec import shorten
from bot.store.sql.terms import words

MIN_SHARE_OF_BEST = 0.25
MIN_HIT_BYTES = 256  # a last hit shortened below this says nothing; leave it out instead
# A term held by more than this share of the memories says little about any one of them; the
# share is judged only once the store holds COMMON_FROM memories (before that, every word of a
# young store is "in many of them").
COMMON_SHARE = 0.2
COMMON_FROM = 20
# Words that start no search on their own: chatter and conversation glue (the FTS stopwords
# already drop function words).
_CHATTER_TEXT = """
    today tomorrow yesterday morning evening night week day time now later soon again still
    good great fine nice cool awesome sure right really much many lot lots bit little thing things
    stuff something anything everything nothing someone anyone everyone going doing done make
    made take took give gave come came see saw look looks looking go went gone back well maybe
    probably actually just quick quickly ask asked question help could would should can will
    sounds sound work works working way ready okay ok thx ty lol haha cheers bye afternoon guys
    folks everybody team all
"""
CHATTER = frozenset(_CHATTER_TEXT.split())
# Suffixes a light stemmer strips (longest first), keeping at least three letters.
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ed", "es", "ic", "y", "s")
# A preceding message this short ("ok", "thanks!") holds nothing worth comparing.
MIN_FENCE_CHARS = 12


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """Strip suffixes until none applies ("deploying" -> "deploy" -> "deplo", as "deploy").
    Cached: recall stems the same words turn after turn."""
    for _ in range(3):
        cut = next((s for s in _SUFFIXES if word.endswith(s) and len(word) - len(s) >= 3), "")
        if not cut:
            break
        word = word[: -len(cut)]
    return word


def specific_terms(terms: Iterable[str], docs: Mapping[str, int], corpus: int) -> list[str]:
    """The query's specific terms: no chatter, and not common once the store is big enough.
    `docs` maps a term to how many memories hold it (a term it lacks is taken as rare)."""
    common = corpus * COMMON_SHARE if corpus >= COMMON_FROM else float("inf")
    return [t for t in terms if t not in CHATTER and docs.get(t, 0) <= common]


def weights(specific: Iterable[str], docs: Mapping[str, int], corpus: int) -> dict[str, float]:
    """Each specific term the store holds, weighed by rarity (an inverse document frequency)."""
    return {t: math.log1p(max(corpus, 1) / docs[t]) for t in specific if docs.get(t, 0) > 0}


def needed(specific: Sequence[str]) -> int:
    """How many specific terms a hit must contain: one of up to three, else two."""
    return 1 if len(specific) <= 3 else 2


def matched(text: str, specific: Sequence[str]) -> list[str]:
    """The specific terms `text` contains (on light stems)."""
    held = _stems(text)
    return [term for term in specific if stem(term) in held]


@functools.lru_cache(maxsize=1_024)
def _stems(text: str) -> frozenset[str]:
    """A memory's stems, cached: the same memories are candidates turn after turn."""
    return frozenset(stem(word) for word in words(text))


def relevant(text: str, specific: Sequence[str], weight: Mapping[str, float]) -> bool:
    """Whether a hit's `text` matches the query on enough specific terms (see the docstring)."""
    found = matched(text, specific)
    if len(found) < needed(specific):
        return False
    if len(found) >= 2:
        return True
    total = sum(weight.values())
    return not total or weight.get(found[0], 0.0) > total / 2


def normalized(text: str) -> str:
    return " ".join(text.casefold().split())


def in_fence(said: str, preceding: Iterable[str]) -> bool:
    """Whether the speaker's words `said` are already one of the preceding messages."""
    mine = normalized(said)
    if len(mine) < MIN_FENCE_CHARS:
        return False
    return any(mine in normalized(text) for text in preceding)


def select(
    candidates: Sequence[MemoryHit],
    specific: Sequence[str],
    weight: Mapping[str, float],
    preceding: Sequence[str],
    *,
    max_hits: int,
    max_bytes: int,
) -> list[MemoryHit]:
    """Apply hold-back by the fence, the relevance gate and the bounds to best-first candidates.
    `weight` is `weights(specific, ...)`: the store's own term counts."""
    if not specific:
        return []
    kept = [
        hit
        for hit in candidates
        if not in_fence(hit.said, preceding) and relevant(hit.text, specific, weight)
    ]
    if not kept:
        return []
    cut = kept[0].score * MIN_SHARE_OF_BEST
    return bounded([hit for hit in kept if hit.score >= cut][:max_hits], max_bytes)


def bounded(hits: Sequence[MemoryHit], max_bytes: int) -> list[MemoryHit]:
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
            kept.append(replace(hit, text=shorten(hit.text, room)))
        break
    return kept
