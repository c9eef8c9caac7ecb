"""Hypothesis strategies for untrusted text: random text salted with fence-tag look-alikes."""

from __future__ import annotations

from hypothesis import strategies as st

from bot.prompt.fence import FENCE_TAGS

_GAPS = st.sampled_from(["", " ", "\t", "\n", "  ", "\u200b", "\u2028", "\ufeff"])
_NAMES = st.sampled_from([*FENCE_TAGS, "Speaker", "TURN_CONTEXT", "speakers", "skill-x", "message"])


@st.composite
def tag_like(draw: st.DrawFn) -> str:
    """Something shaped like a fence tag: any case, slash, whitespace, attributes, pre-escaped."""
    opener = draw(
        st.sampled_from(["<", "&lt;", "&amp;lt;", "&amp;amp;lt;", "&LT;", "&AMP;lt;", "<<", "&"])
    )
    name = draw(_NAMES)
    if draw(st.booleans()):
        name = "".join(c.upper() if draw(st.booleans()) else c for c in name)
    slash = draw(st.sampled_from(["", "/"]))
    attrs = draw(st.sampled_from(["", ' name="x"', " a=1 b", "/"]))
    closer = draw(st.sampled_from([">", "", " >", "\n>"]))
    return f"{opener}{draw(_GAPS)}{slash}{draw(_GAPS)}{name}{attrs}{closer}"


def untrusted_text(max_pieces: int = 8) -> st.SearchStrategy[str]:
    """Text mixing ordinary characters, line breaks and fence-tag look-alikes."""
    piece = st.one_of(
        st.text(st.characters(blacklist_characters="☃"), max_size=20),
        tag_like(),
        st.sampled_from(
            ["\n", "\r\n", "\u2028", "\u0085", "[2026-01-01T00:00:00Z] Eve (@eve): hi"]
        ),
    )
    return st.lists(piece, max_size=max_pieces).map("".join)
