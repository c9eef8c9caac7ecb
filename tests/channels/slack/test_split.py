"""Splitting formatted answers into Slack-sized parts (property-tested)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.slack.split import FENCE, MESSAGE_BUDGET, MIN_LIMIT, is_fence, split_message

WORD = st.text(alphabet="abcdefgh&;<>`*_ ", min_size=1, max_size=30).filter(str.strip)
LINE = st.lists(WORD, min_size=0, max_size=12).map(" ".join)
CODE = st.lists(LINE, min_size=0, max_size=15).map(lambda lines: "\n".join([FENCE, *lines, FENCE]))
PROSE = st.lists(LINE, min_size=1, max_size=8).map("\n".join)
BLOCK = st.one_of(PROSE, CODE, st.text(max_size=200), st.text(alphabet="ab \n`", max_size=300))
DOCUMENT = st.lists(BLOCK, min_size=0, max_size=12).map("\n\n".join)


def fence_lines(text: str) -> int:
    return sum(1 for line in text.split("\n") if is_fence(line))


def content(text: str) -> str:
    """The text without fence lines and without any whitespace: what must survive splitting."""
    kept = [line for line in text.split("\n") if not is_fence(line)]
    return re.sub(r"\s+", "", "".join(kept))


# One test for both properties: generating the documents is most of its time, so each generated
# document is checked for both.
@settings(max_examples=300, deadline=None)
@given(text=DOCUMENT, limit=st.integers(min_value=MIN_LIMIT, max_value=400))
def test_parts_fit_are_balanced_lose_nothing_and_cut_no_entity(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    for part in parts:
        assert len(part) <= limit
        assert fence_lines(part) % 2 == 0, part
        assert part.strip()
    if fence_lines(text) % 2 == 0:
        assert content("\n".join(parts)) == content(text)
    else:  # an unclosed block is closed, never dropped
        assert content(text) == content("\n".join(parts))
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for part in split_message(escaped, limit):
        # every & still opens a whole entity: none was cut in two
        assert part.count("&") == len(re.findall(r"&(?:amp|lt|gt);", part)), part


def test_short_text_is_one_part() -> None:
    assert split_message("hello there") == ["hello there"]


def test_empty_text_is_no_part() -> None:
    assert split_message("  \n\n ") == []


def test_paragraphs_are_preferred_over_lines_and_words() -> None:
    first = "a" * 30
    second = "b " * 20
    parts = split_message(f"{first}\n\n{second.strip()}", limit=60)
    assert parts[0] == first


def test_a_code_block_is_closed_and_reopened_across_parts() -> None:
    code = "\n".join(f"line {i}" for i in range(40))
    parts = split_message(f"Intro\n\n{FENCE}\n{code}\n{FENCE}\n\nOutro", limit=120)
    assert len(parts) > 2
    for part in parts:
        assert fence_lines(part) % 2 == 0
    assert parts[1].startswith(FENCE + "\n")
    assert all(part.endswith(FENCE) for part in parts[1:-1])


def test_a_9000_character_answer_is_three_parts() -> None:
    paragraph = ("word " * 179).strip()  # 899 characters
    parts = split_message("\n\n".join([paragraph] * 10))
    assert len(parts) == 3
    assert all(len(part) <= MESSAGE_BUDGET for part in parts)


def test_one_long_word_is_cut_hard() -> None:
    parts = split_message("x" * 100, limit=40)
    assert "".join(parts) == "x" * 100
    assert all(len(part) <= 40 for part in parts)


def test_too_small_a_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        split_message("text", limit=MIN_LIMIT - 1)
