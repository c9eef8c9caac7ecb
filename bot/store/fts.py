"""Turning arbitrary text into a safe SQLite FTS5 MATCH expression.

User text is never passed to MATCH as query syntax: it is cut into word tokens, each token becomes
a double-quoted FTS5 string (a token holds no quote, so none needs escaping), and the strings are
OR-ed. Words too common to say anything are dropped (with "user" and "assistant", which every
stored memory's attribution contains), and the number of terms is bounded so a long
message cannot become an expensive query.
"""

from __future__ import annotations

import re

MAX_TERMS = 24
MAX_TERM_CHARS = 64

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


def query_terms(text: str) -> list[str]:
    """The distinct meaningful words of `text`, lowercased, in order of first appearance."""
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word in seen or word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        seen.add(word)
        terms.append(word[:MAX_TERM_CHARS])
        if len(terms) == MAX_TERMS:
            break
    return terms


def match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression for `text`, or None when it holds no searchable word."""
    terms = query_terms(text)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)
