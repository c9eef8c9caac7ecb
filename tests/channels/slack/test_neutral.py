"""The Markdown a native Slack stream is sent (`channels.slack.neutral`) and the link check it
shares with every rendering (`bot.linkcheck`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.linkcheck import misleading
from channels.slack.neutral import JOINER, stream_text

PIECES = st.sampled_from(
    ["[", "]", "(", ")", "<", ">", "@", "!", "here", "https://", "good.example", "\n", " ", "x"]
)


def test_a_link_naming_another_address_misleads() -> None:
    assert misleading("https://good.example", "https://evil.example/phish")
    assert misleading("good.example", "https://evil.example")
    assert misleading("see good．example now", "https://evil.example")  # a fullwidth dot
    assert misleading("good.exa\u200bmple", "https://evil.example")  # an invisible character
    assert misleading("https://good.example/a", "https://good.example/b")


def test_a_link_whose_text_is_its_address_or_no_address_does_not() -> None:
    assert not misleading("the docs", "https://evil.example")
    assert not misleading("version 1.2, e.g. this", "https://evil.example")
    assert not misleading("good.example", "https://good.example/login")
    assert not misleading("https://www.good.example/", "https://good.example")
    assert not misleading("https://good.example/a", "https://good.example/a/b?c=d")


def test_pings_and_misleading_links_are_inert_in_the_streamed_markdown() -> None:
    text = (
        "<!here> [https://good.example](https://evil.example/p) [docs](https://good.example) @all"
    )
    shown = stream_text(text)
    assert "<!here>" not in shown
    assert f"<{JOINER}!here>" in shown
    assert "https://good.example (https://evil.example/p)" in shown
    assert "[docs](https://good.example)" in shown  # a link that does not mislead stays live
    assert f"@{JOINER}all" in shown


def test_a_link_being_written_is_held_back() -> None:
    assert stream_text("read [the docs](https://good.ex") == "read "
    assert (
        stream_text("read [the docs](https://good.example)")
        == "read [the docs](https://good.example)"
    )


@given(st.lists(PIECES, max_size=40).map("".join), st.integers(0, 200))
def test_what_was_streamed_stays_a_prefix_of_what_follows(text: str, cut: int) -> None:
    assert stream_text(text).startswith(stream_text(text[:cut]))
