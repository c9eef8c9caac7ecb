"""Markdown to Slack mrkdwn: formatting examples and escaping properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.slack.mrkdwn import escape, to_mrkdwn, unescape
from channels.slack.split import MESSAGE_BUDGET, is_fence, split_message

# Our own markup: a link `<url|label>` / `<url>` with an escaped url and a label without < or >.
LINK = re.compile(r"<[a-z][a-z0-9+.-]*:[^<>|\s]*(?:\|[^<>]*)?>")


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __also__", "*bold* and *also*"),
        ("*it* and _it_", "_it_ and _it_"),
        ("~~gone~~", "~gone~"),
        ("***both***", "_*both*_"),
        ("# Title\n\ntext", "*Title*\n\ntext"),
        ("## **Bold** title", "*Bold title*"),
        ("[docs](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|docs>"),
        ("<https://example.com>", "<https://example.com>"),
        ("[a|b](https://example.com/x|y)", "<https://example.com/x%7Cy|a|b>"),
        ("![chart](https://example.com/c.png)", "<https://example.com/c.png|chart>"),
        ("`a < b`", "`a &lt; b`"),
        ("``a ` b``", "`a ˋ b`"),
        (
            "```python\nif a < b and c > d:\n    pass\n```",
            "```\nif a &lt; b and c &gt; d:\n    pass\n```",
        ),
        ("    indented code", "```\nindented code\n```"),
        ("- one\n- two\n  - deeper", "• one\n• two\n    ◦ deeper"),
        ("3. three\n4. four", "3. three\n4. four"),
        ("> quoted\n> still", "> quoted\n> still"),
        ("> outer\n> > inner", "> outer\n>\n> &gt; inner"),
        ("- > quoted item", "• &gt; quoted item"),
        ("a\n\n---\n\nb", "a\n\n───────\n\nb"),
        ("line one\nline two", "line one\nline two"),
        ("<!channel> & <@U123> <b>", "&lt;!channel&gt; &amp; &lt;@U123&gt; &lt;b&gt;"),
        ("| a | b |\n|---|---|\n| 1 | 22 |", "```\na | b\n--+---\n1 | 22\n```"),
    ],
)
def test_formatting(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_backtick_lines_inside_code_cannot_close_the_block() -> None:
    rendered = to_mrkdwn("````\n```\ninside\n````")
    assert sum(1 for line in rendered.split("\n") if is_fence(line)) == 2
    assert "inside" in rendered


QUOTE = re.compile(r"^>(?: |$)", re.MULTILINE)


def without_links(text: str) -> str:
    """Our own markup removed: links, and the `> ` that starts a quoted line."""
    return QUOTE.sub("", LINK.sub("", text))


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_escaping_leaves_no_raw_markup(markdown: str) -> None:
    rendered = without_links(to_mrkdwn(markdown))
    assert "<" not in rendered, rendered
    assert ">" not in rendered, rendered
    assert rendered.count("&") == len(re.findall(r"&(?:amp|lt|gt);", rendered)), rendered


MARKDOWNISH = st.text(alphabet="ab <>&*_~`#-[]()!|\n:/.", max_size=300)


@settings(max_examples=400, deadline=None)
@given(MARKDOWNISH)
def test_escaping_holds_for_markdown_heavy_text(markdown: str) -> None:
    rendered = without_links(to_mrkdwn(markdown))
    assert "<" not in rendered, rendered
    assert ">" not in rendered, rendered
    assert rendered.count("&") == len(re.findall(r"&(?:amp|lt|gt);", rendered)), rendered


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="abcxyz<>&", min_size=1, max_size=12), max_size=40))
def test_plain_words_survive_in_order(words: list[str]) -> None:
    text = " ".join(["say", *words])  # a leading ">" would be a Markdown quote
    assert unescape(to_mrkdwn(text)) == text.strip()


@settings(max_examples=200, deadline=None)
@given(MARKDOWNISH, st.integers(min_value=40, max_value=300))
def test_formatted_then_split_parts_stay_balanced(markdown: str, limit: int) -> None:
    for part in split_message(to_mrkdwn(markdown), limit):
        assert len(part) <= limit
        assert sum(1 for line in part.split("\n") if is_fence(line)) % 2 == 0


def test_escape_round_trip() -> None:
    text = "a & b < c > d &amp;"
    assert escape(text) == "a &amp; b &lt; c &gt; d &amp;amp;"
    assert unescape(escape(text)) == text


def test_a_long_answer_with_code_splits_within_budget() -> None:
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(200))
    markdown = "Here is the script:\n\n```python\n" + code + "\n```\n\nDone."
    parts = split_message(to_mrkdwn(markdown))
    assert len(parts) >= 3
    for part in parts:
        assert len(part) <= MESSAGE_BUDGET
        assert sum(1 for line in part.split("\n") if is_fence(line)) % 2 == 0
