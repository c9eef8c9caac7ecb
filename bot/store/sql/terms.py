"""The words of a memory or a query, whatever the engine's full-text search
(`bot.store.sql.memory`).

Text is cut into word tokens of letters and digits only (no quote, no operator), so an engine can
quote each one into its own query syntax and user text is never read as syntax. Words too common
to say anything are dropped (with "user" and "assistant", which every stored memory's attribution
contains).

Cost is bounded too: BM25 is computed for every row that matches any word, so `choose_terms` keeps
a query's rarest words first, up to a budget of candidate rows, and drops words present in over
half the memories (BM25 gives those almost no weight anyway).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_TERMS = 24
MAX_TERM_CHARS = 64
CANDIDATE_BUDGET = 4_000  # rows a recall may have to score, estimated from word frequencies
SMALL_CORPUS = 64  # below this many memories every word is kept: scoring them all is cheap

# Letters and digits only: underscores and punctuation separate words, as FTS5's unicode61
# tokenizer does, so what we quote is what the index holds.
_WORD = re.compile(r"[^\W_]+")

_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    please thanks thank hi hello hey ok okay yes yeah also get got let lets know tell remember
    like want need say said think one two use used us dont im ive youre whats
    user assistant
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def words(text: str) -> Iterable[str]:
    """The distinct meaningful words of `text`, lowercased, in order of first appearance."""
    seen: set[str] = set()
    for word in _WORD.findall(text.lower()):
        word = word[:MAX_TERM_CHARS]
        if word in seen or word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        seen.add(word)
        yield word


def query_terms(text: str) -> list[str]:
    """The words of a query, at most MAX_TERMS of them."""
    terms: list[str] = []
    for word in words(text):
        terms.append(word)
        if len(terms) == MAX_TERMS:
            break
    return terms


def choose_terms(
    terms: list[str],
    docs: Mapping[str, int],
    corpus: int,
    budget: int = CANDIDATE_BUDGET,
) -> list[str]:
    """The terms worth searching: rarest first, while their rows fit `budget` (always at least
    the rarest one), without words in over half of `corpus` memories. `docs` maps a word to the
    number of memories holding it; a word it lacks is taken as rare."""
    if corpus < SMALL_CORPUS:
        return terms
    useful = sorted(
        (t for t in terms if docs.get(t, 0) * 2 <= corpus), key=lambda t: docs.get(t, 0)
    )
    chosen: list[str] = []
    rows = 0
    for term in useful:
        rows += docs.get(term, 0)
        if chosen and rows > budget:
            break
        chosen.append(term)
    return chosen
