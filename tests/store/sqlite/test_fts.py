"""The FTS5 query builder: any text is either no query or a query SQLite accepts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.store.sql.terms import CANDIDATE_BUDGET, MAX_TERMS, SMALL_CORPUS, choose_terms, query_terms
from bot.store.sqlite.fts import match_expression


@pytest.fixture(scope="module")
def index() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5 "
        "(text, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO t (text) VALUES (?)",
        [("the deploy of release 42 is friday",), ('quotes " and * NEAR( stars',)],
    )
    yield conn
    conn.close()


# FTS5 syntax is the hostile part: quotes, operators, parentheses, column filters, stars, carets.
fts_syntax = st.sampled_from(
    ['"', "'", "*", "^", "(", ")", ":", "-", "+", "NEAR", "AND", "OR", "NOT", "{", "}", "\x00"]
)
hostile_text = st.lists(st.one_of(st.text(max_size=12), fts_syntax), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(), hostile_text))
def test_any_text_makes_a_query_fts5_accepts(index: sqlite3.Connection, text: str) -> None:
    expression = match_expression(query_terms(text))
    if expression is None:
        assert query_terms(text) == []
        return
    index.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank", (expression,)).fetchall()


@given(text=st.text())
def test_terms_are_bounded_distinct_and_never_stopwords(text: str) -> None:
    terms = query_terms(text)
    assert len(terms) <= MAX_TERMS
    assert len(set(terms)) == len(terms)
    assert "the" not in terms


def test_words_and_numbers_are_kept_punctuation_is_not() -> None:
    assert query_terms('What is "Project-X"\'s deploy date? (release 42)') == [
        "project",
        "deploy",
        "date",
        "release",
        "42",
    ]


def test_operator_words_are_searched_as_words(index: sqlite3.Connection) -> None:
    expression = match_expression(query_terms("NEAR( stars"))
    assert expression is not None
    rows = index.execute("SELECT text FROM t WHERE t MATCH ?", (expression,)).fetchall()
    assert rows == [('quotes " and * NEAR( stars',)]


frequencies = st.dictionaries(st.sampled_from("abcdefghij"), st.integers(0, 20_000))


@given(
    terms=st.lists(st.sampled_from("abcdefghijk"), unique=True, max_size=11),
    docs=frequencies,
    corpus=st.integers(0, 40_000),
)
def test_chosen_terms_are_the_rarest_within_budget(
    terms: list[str], docs: dict[str, int], corpus: int
) -> None:
    chosen = choose_terms(terms, docs, corpus)

    assert set(chosen) <= set(terms)
    if corpus < SMALL_CORPUS:
        assert chosen == terms
        return
    assert all(docs.get(t, 0) * 2 <= corpus for t in chosen)
    if len(chosen) > 1:
        assert sum(docs.get(t, 0) for t in chosen) <= CANDIDATE_BUDGET
    left_out = [t for t in terms if t not in chosen and docs.get(t, 0) * 2 <= corpus]
    if chosen and left_out:
        assert max(docs.get(t, 0) for t in chosen) <= min(docs.get(t, 0) for t in left_out)
    if any(docs.get(t, 0) * 2 <= corpus for t in terms):
        assert chosen, "at least the rarest useful word is always searched"
