"""Pairing's store (`bot.ports.access`) on every engine: a code admits once, within its hour, only
the newest of a person's codes works, a person gets a few an hour, and only digests are kept."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bot.policy.access import ALPHABET, CODE_TTL_SECONDS, CODES_PER_HOUR, code_digest, new_code
from bot.ports.stores import OpenStore
from tests.engines import Clock

pytestmark = pytest.mark.all_engines
ANN = "telegram:4242"


async def test_a_code_admits_its_person_once_and_revoking_takes_it_back(
    store: OpenStore,
) -> None:
    access = store.access
    code = await access.ask(ANN, "Ann (@ann)")
    assert code is not None
    assert await access.admitted(ANN) is False
    assert [(a.person, a.label) for a in await access.asking()] == [(ANN, "Ann (@ann)")]
    admitted = await access.approve(code.lower().replace("-", " "))  # as a person may type it
    assert admitted is not None
    assert (admitted.person, admitted.label) == (ANN, "Ann (@ann)")
    assert await access.admitted(ANN) is True
    assert await access.approve(code) is None  # single use
    assert await access.asking() == []
    assert [a.person for a in await access.people()] == [ANN]
    assert await access.ask(ANN, "Ann") is None  # admitted: no code needed
    assert await access.revoke(ANN) is True
    assert await access.revoke(ANN) is False
    assert await access.admitted(ANN) is False


async def test_only_the_newest_code_works_and_a_person_gets_a_few_an_hour(
    store: OpenStore, clock: Clock
) -> None:
    access = store.access
    codes = [await access.ask(ANN, "Ann") for _ in range(CODES_PER_HOUR)]
    assert all(codes)
    assert await access.ask(ANN, "Ann") is None  # rate-limited
    assert await access.ask("telegram:7", "Bo") is not None  # per person
    first, *_, newest = codes
    assert first is not None
    assert newest is not None
    assert await access.approve(first) is None
    clock.now += CODE_TTL_SECONDS + 1
    assert await access.approve(newest) is None  # expired
    assert await access.ask(ANN, "Ann") is not None  # a new hour


async def test_the_store_keeps_no_code_only_its_digest(store: OpenStore) -> None:
    code = await store.access.ask(ANN, "Ann")
    assert code is not None
    dump = repr(getattr(store, "tables", None)) + repr(await store.access.asking())
    if hasattr(store, "db"):
        rows = await store.db.fetch_all("SELECT * FROM access_codes")  # type: ignore[attr-defined]
        dump += repr([tuple(row) for row in rows])
    assert code.replace("-", "") not in dump.replace("-", "")
    assert code_digest(code) in dump


@given(st.text(max_size=40))
@example("ABCD-EFG0")  # a look-alike the alphabet leaves out
@example("abcd-efgh\n")
def test_any_typed_code_is_read_or_refused_never_raises(typed: str) -> None:
    digest = code_digest(typed)
    raw = "".join(typed.split()).replace("-", "").upper()
    if digest is not None:
        assert len(raw) == 8
        assert set(raw) <= set(ALPHABET)


def test_a_new_code_reads_back_as_itself() -> None:
    code = new_code()
    assert code_digest(code) == code_digest(code.lower())
    assert code_digest(code) is not None
