"""The `?` to `$n` rewrite that lets the shared store SQL (`bot.store.sql`) run on PostgreSQL."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.store.postgres.sql import numbered

_PLAIN = st.text(alphabet=st.characters(blacklist_characters="?'\""), max_size=12)
# A quoted string or name: anything but its own quote inside, placeholders' marks included.
_QUOTED = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="'"), max_size=8).map(lambda t: f"'{t}'"),
    st.text(alphabet=st.characters(blacklist_characters='"'), max_size=8).map(lambda t: f'"{t}"'),
)
_PIECE = st.one_of(_PLAIN, _QUOTED, st.just("?"))


@given(st.lists(_PIECE, max_size=20))
def test_each_placeholder_outside_quotes_is_numbered_in_order(pieces: list[str]) -> None:
    expected, count = [], 0
    for piece in pieces:
        if piece == "?":
            count += 1
            expected.append(f"${count}")
        else:
            expected.append(piece)
    assert numbered("".join(pieces)) == "".join(expected)


def test_statements_without_placeholders_are_unchanged() -> None:
    sql = "SELECT count(*) FROM memories WHERE text = 'who?' AND \"odd?name\" IS NULL"
    assert numbered(sql) == sql
    assert (
        numbered("UPDATE t SET a = ?, b = ? WHERE c = ?")
        == "UPDATE t SET a = $1, b = $2 WHERE c = $3"
    )
