"""Long-term memory: attributed capture, BM25 recall across conversations, the privacy scope."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.config import MemorySettings
from bot.ports.memory import MemoryCapture, MemoryScope
from bot.ports.stores import OpenStore
from bot.store.sql.memory import memory_text
from tests.engines import Clock, Engine

pytestmark = pytest.mark.all_engines

AT = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)

ALICE = "slack:T1:U_ALICE"
BOB = "slack:T1:U_BOB"
CAROL = "slack:T1:U_CAROL"
GENERAL = "slack:C_GENERAL"  # a channel Alice and Bob speak in
RANDOM = "slack:C_RANDOM"  # a channel only Carol speaks in
ALICE_DM = "slack:D_ALICE"
BOB_DM = "slack:D_BOB"


def said(
    person: str | None, label: str | None, surface: str, text: str, answer: str = "Noted."
) -> MemoryCapture:
    return MemoryCapture(
        conversation_key=f"{surface}:thread",
        surface=surface,
        person=person,
        speaker_label=label,
        user_text=text,
        answer=answer,
        at=AT,
    )


FILLER_TOPICS = [
    "the staging database migration finished without errors",
    "the quarterly roadmap review moved to next Tuesday",
    "customer invoices for February were sent out",
    "the on-call rotation now starts on Mondays",
    "the release notes draft needs a second reviewer",
    "the office coffee machine was repaired",
    "lunch order for the offsite is sushi",
    "the dashboard latency alert threshold was raised",
    "the design review for the settings page is done",
    "the backlog grooming session ran long",
]


async def seed_corpus(store: OpenStore) -> None:
    """A few hundred ordinary exchanges across surfaces, and the facts the tests look for."""
    people = [(ALICE, "Alice Chen (@alice)"), (BOB, "Bob Stone (@bob)"), (CAROL, "Carol (@carol)")]
    for n in range(240):
        person, label = people[n % 3]
        surface = [GENERAL, RANDOM, GENERAL][n % 3]
        await store.memory.capture(said(person, label, surface, f"{FILLER_TOPICS[n % 10]} ({n})"))
    # Alice tells a fact in a group channel; Bob tells a secret in his DM.
    await store.memory.capture(
        said(ALICE, "Alice Chen (@alice)", GENERAL, "My badge number is 7731 and I sit on floor 4")
    )
    await store.memory.capture(
        said(BOB, "Bob Stone (@bob)", BOB_DM, "My salary negotiation target is 180k, keep it quiet")
    )
    await store.memory.capture(
        said(CAROL, "Carol (@carol)", RANDOM, "The vendor escrow account closes on 14 April")
    )


def test_memory_text_names_the_speaker() -> None:
    text = memory_text(said(ALICE, "Alice Chen (@alice)", GENERAL, "I like tea", "Got it."))
    assert text == "User (Alice Chen (@alice)): I like tea\nAssistant: Got it."
    assert memory_text(said(None, None, "cron:daily", "run", "done")).startswith("User: run")


async def test_group_fact_comes_back_in_the_speakers_dm(store: OpenStore) -> None:
    await seed_corpus(store)

    hits = await store.memory.recall(
        "what is my badge number?", MemoryScope(ALICE_DM, person=ALICE, private=True)
    )

    assert hits, "Alice's own fact, said in a channel she spoke in, must reach her DM"
    assert "7731" in hits[0].text
    assert hits[0].text.startswith("User (Alice Chen (@alice)):")


async def test_dm_fact_never_surfaces_in_a_channel(store: OpenStore) -> None:
    await seed_corpus(store)

    in_channel = await store.memory.recall(
        "salary negotiation target", MemoryScope(GENERAL, person=BOB)
    )
    in_bobs_dm = await store.memory.recall(
        "salary negotiation target", MemoryScope(BOB_DM, person=BOB, private=True)
    )

    assert all("180k" not in hit.text for hit in in_channel)
    assert any("180k" in hit.text for hit in in_bobs_dm)


async def test_dm_fact_never_surfaces_in_another_persons_dm(store: OpenStore) -> None:
    await seed_corpus(store)

    hits = await store.memory.recall(
        "salary negotiation target", MemoryScope(ALICE_DM, person=ALICE, private=True)
    )

    assert all("180k" not in hit.text for hit in hits)


async def test_dm_recall_excludes_surfaces_the_person_never_spoke_in(store: OpenStore) -> None:
    await seed_corpus(store)

    alice = await store.memory.recall(
        "vendor escrow account", MemoryScope(ALICE_DM, person=ALICE, private=True)
    )
    carol = await store.memory.recall(
        "vendor escrow account", MemoryScope("slack:D_CAROL", person=CAROL, private=True)
    )

    assert all("escrow" not in hit.text for hit in alice)
    assert any("escrow" in hit.text for hit in carol)


async def test_channel_recall_uses_only_that_channel(store: OpenStore) -> None:
    await seed_corpus(store)

    hits = await store.memory.recall("vendor escrow account", MemoryScope(GENERAL, person=ALICE))

    assert all(hit.surface == GENERAL for hit in hits)
    assert all("escrow" not in hit.text for hit in hits)


async def test_recall_is_bounded_by_count_and_bytes(store: OpenStore) -> None:
    await seed_corpus(store)  # upgrade notes are a few among many: their words stay specific
    for n in range(30):
        await store.memory.capture(
            said(ALICE, "Alice", GENERAL, f"kubernetes upgrade note {n}: " + "detail " * 300)
        )

    hits = await store.memory.recall("kubernetes upgrade", MemoryScope(GENERAL))

    assert 0 < len(hits) <= 5
    assert sum(len(hit.text.encode()) for hit in hits) <= 8 * 1024


async def test_words_matching_nothing_recall_nothing(store: OpenStore) -> None:
    await seed_corpus(store)

    assert await store.memory.recall("zebra xylophone", MemoryScope(GENERAL)) == []
    assert await store.memory.recall("the and of ???", MemoryScope(GENERAL)) == []


async def test_console_recall_is_its_own_conversation_unless_widened(
    engine: Engine, store: OpenStore
) -> None:
    await store.memory.capture(said(None, None, "console:a", "the wifi password hint is heron"))
    other = MemoryScope("console:b", surfaceless=True)

    assert await store.memory.recall("wifi password hint", other) == []
    assert await store.memory.recall(
        "wifi password hint", MemoryScope("console:a", surfaceless=True)
    )

    wide = await engine.open(MemorySettings(wide_console_recall=True))
    try:
        assert await wide.memory.recall("wifi password hint", other)
        # Widening is for console and request turns only: a channel stays confined.
        assert await wide.memory.recall("wifi password hint", MemoryScope(GENERAL)) == []
    finally:
        await wide.aclose()


async def test_search_and_forget(store: OpenStore) -> None:
    await seed_corpus(store)
    found = await store.memory.search("badge number")
    assert found
    assert "7731" in found[0].text

    assert await store.memory.forget(found[0].id) is True
    assert await store.memory.forget(found[0].id) is False
    scope = MemoryScope(ALICE_DM, person=ALICE, private=True)
    assert all("7731" not in hit.text for hit in await store.memory.recall("badge number", scope))


async def test_forget_rejects_an_id_that_is_not_a_number(store: OpenStore) -> None:
    with pytest.raises(ValueError, match="not a number"):
        await store.memory.forget("abc")


async def test_disabled_memory_neither_captures_nor_recalls(engine: Engine) -> None:
    store = await engine.open(MemorySettings(enabled=False))
    try:
        await store.memory.capture(said(ALICE, "Alice", GENERAL, "badge number 7731"))
        assert await store.memory.count() == 0
        assert await store.memory.recall("badge", MemoryScope(GENERAL)) == []
    finally:
        await store.aclose()


async def test_a_young_memory_recalls_its_only_fact(store: OpenStore) -> None:
    # With one row, BM25 weighs every word as common; recall must still find it.
    await store.memory.capture(said(ALICE, "Alice", ALICE_DM, "my badge number is 7731"))

    hits = await store.memory.recall("badge number", MemoryScope(ALICE_DM, ALICE, private=True))

    assert [("7731" in hit.text) for hit in hits] == [True]


async def test_words_in_every_memory_alone_recall_nothing_in_a_grown_memory(
    store: OpenStore,
) -> None:
    await seed_corpus(store)

    assert await store.memory.recall("user assistant noted", MemoryScope(GENERAL)) == []


async def test_memory_keeps_at_most_max_entries_dropping_the_oldest(
    engine: Engine, clock: Clock
) -> None:
    store = await engine.open(MemorySettings(max_entries=100))
    try:
        await store.memory.capture(
            said("p1", "Ada", "slack:C1", "the oldest fact is about pelicans")
        )
        for n in range(199):
            await store.memory.capture(said("p1", "Ada", "slack:C1", f"filler note number {n}"))
        assert await store.memory.count() == 100
        assert await store.memory.search("pelicans") == []  # gone from the index too
        scope = MemoryScope(surface="slack:C1")
        assert await store.memory.recall("filler note 198", scope)
    finally:
        await store.aclose()


def at(hours: float) -> datetime:
    return AT + timedelta(hours=hours)


async def test_dm_recall_of_others_is_limited_to_a_window_around_the_persons_own_messages(
    store: OpenStore,
) -> None:
    await seed_corpus(store)  # Alice speaks in GENERAL at AT (hour 0)
    before = replace(said(BOB, "Bob", GENERAL, "the pelican budget is 9k"), at=at(-24 * 10))
    inside = replace(said(BOB, "Bob", GENERAL, "the heron budget is 5k"), at=at(1))
    after = replace(said(CAROL, "Carol", GENERAL, "the egret budget is 2k"), at=at(24 * 10))
    for item in (before, inside, after):
        await store.memory.capture(item)
    dm = MemoryScope(ALICE_DM, person=ALICE, private=True)

    assert await store.memory.recall("heron budget", dm)
    assert await store.memory.recall("pelican budget", dm) == []
    assert await store.memory.recall("egret budget", dm) == []
    # The channel itself still hears all of it.
    assert await store.memory.recall("egret budget", MemoryScope(GENERAL, person=BOB))


async def test_leaving_ends_dm_recall_of_others_there_until_the_person_speaks_again(
    store: OpenStore,
) -> None:
    await seed_corpus(store)
    await store.memory.capture(
        replace(said(BOB, "Bob", GENERAL, "the heron budget is 5k"), at=at(1))
    )
    dm = MemoryScope(ALICE_DM, person=ALICE, private=True)
    assert await store.memory.recall("heron budget", dm)

    await store.memory.left(ALICE, GENERAL, at(2))

    assert await store.memory.recall("heron budget", dm) == []
    assert await store.memory.recall("badge number 7731", dm), "her own words stay hers"
    # Back a month later: what is said around her new messages counts again, the old does not.
    await store.memory.capture(replace(said(ALICE, "Alice", GENERAL, "I am back"), at=at(720)))
    await store.memory.capture(
        replace(said(BOB, "Bob", GENERAL, "the egret budget is 2k"), at=at(721))
    )
    assert await store.memory.recall("egret budget", dm)
    assert await store.memory.recall("heron budget", dm) == []


async def test_own_lists_and_forget_own_deletes_only_the_speakers_entries(store: OpenStore) -> None:
    await store.memory.capture(said(ALICE, "Alice", GENERAL, "alpha fact", "ok"))
    await store.memory.capture(replace(said(ALICE, "Alice", ALICE_DM, "beta fact"), at=at(1)))
    await store.memory.capture(replace(said(BOB, "Bob", GENERAL, "gamma fact"), at=at(2)))
    in_dm = MemoryScope(ALICE_DM, person=ALICE, private=True)
    in_channel = MemoryScope(GENERAL, person=ALICE)

    mine, total = await store.memory.own(ALICE, in_dm, 10)
    assert [m.said for m in mine] == ["beta fact", "alpha fact"]
    assert total == 2
    here, total = await store.memory.own(ALICE, in_channel, 10)
    assert [m.said for m in here] == ["alpha fact"]
    assert total == 1

    bobs = (await store.memory.own(BOB, MemoryScope(GENERAL, person=BOB), 10))[0]
    assert await store.memory.forget_own(ALICE, in_dm, [bobs[0].id]) == 0, "not hers"
    assert await store.memory.forget_own(ALICE, in_channel, [mine[0].id]) == 0, "not in scope"
    assert await store.memory.forget_own(ALICE, in_dm) == 2
    assert (await store.memory.own(ALICE, in_dm, 10))[1] == 0
    assert [m.said for m in (await store.memory.own(BOB, MemoryScope(GENERAL), 10))[0]] == [
        "gamma fact"
    ]
    assert await store.memory.search("alpha") == []  # gone from the index too
