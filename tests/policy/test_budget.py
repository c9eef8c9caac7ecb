"""Budgets: prices as the provider charges them, and daily limits enforced from the usage the
store keeps (one notice per budget and day, reset at midnight, operators exempt, durable)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from bot import replies
from bot.policy.budget import BudgetLimits, Budgets, BudgetSettings, ModelPrice, cost_usd, price_for
from bot.ports.records import TurnRecord, Usage
from bot.ports.stores import OpenStore
from bot.turns import ConversationKind, Surface, SurfaceKind, TurnRequest
from tests.engines import Engine

pytestmark = pytest.mark.all_engines
NOON = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)  # 12:00 in Berlin
PRICE = ModelPrice(input=3.0, output=15.0)


def test_cache_reads_and_writes_are_priced_as_the_provider_does() -> None:
    million = 1_000_000
    assert cost_usd(Usage(input_tokens=million), PRICE) == pytest.approx(3.0)
    assert cost_usd(Usage(output_tokens=million), PRICE) == pytest.approx(15.0)
    assert cost_usd(Usage(cache_read_tokens=million), PRICE) == pytest.approx(0.3)
    assert cost_usd(Usage(cache_write_tokens=million), PRICE) == pytest.approx(3.75)
    one_hour = Usage(cache_write_tokens=million, cache_write_1h_tokens=million)
    assert cost_usd(one_hour, PRICE) == pytest.approx(6.0)
    assert cost_usd(Usage(input_tokens=million), None) == 0.0


def test_prices_match_the_longest_model_prefix_and_config_overrides() -> None:
    assert price_for("claude-sonnet-4-6", {}) == ModelPrice(input=3.0, output=15.0)
    assert price_for("claude-opus-4-5-2025", {}) == ModelPrice(input=5.0, output=25.0)
    assert price_for("claude-opus-4-1", {}) == ModelPrice(input=15.0, output=75.0)
    mine = {"claude-sonnet-4-6": ModelPrice(input=1.0, output=1.0, cache_read=0.0)}
    assert price_for("claude-sonnet-4-6", mine) == mine["claude-sonnet-4-6"]
    assert price_for("gpt-5", {}) is None


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[OpenStore]:
    opened = await engine.open()
    yield opened
    await opened.aclose()


def request(person: str | None = "slack:T1:U1", surface: str = "C1") -> TurnRequest:
    return TurnRequest(
        f"slack:T1:{surface}:1.0",
        ConversationKind.PUSH,
        "slack",
        "hi",
        NOON,
        "t",
        surface=Surface(SurfaceKind.CHANNEL, surface),
        person=person,
    )


counter = iter(range(1_000_000))


def record(at: datetime, usage: Usage, model: str = "claude-sonnet-4-6") -> TurnRecord:
    return TurnRecord(
        turn_id=f"turn-{next(counter)}",
        conversation_key="k",
        channel="slack",
        started_at=at,
        finished_at=at,
        outcome="ok",
        request={"model": model},
        usage=usage,
    )


def budgets(store: OpenStore, **limits: object) -> Budgets:
    settings = BudgetSettings.model_validate({"operators": ["slack:T1:BOSS"], **limits})
    return Budgets(settings, store.usage, timezone="Europe/Berlin", default_model="claude-x")


async def test_a_surface_budget_refuses_once_reached_and_tells_once_a_day(store: OpenStore) -> None:
    gate = budgets(store)
    rule = BudgetLimits(daily_tokens=1000)
    assert await gate.check(request(), rule, NOON) is None
    await gate.charge(request(), record(NOON, Usage(input_tokens=600, output_tokens=300)))
    assert await gate.check(request(), rule, NOON) is None  # 900 < 1000
    await gate.charge(request(), record(NOON, Usage(cache_read_tokens=100)))
    first = await gate.check(request(), rule, NOON)
    assert first is not None
    assert first.scope == "surface"
    assert first.notify
    assert first.resets_at == datetime(2026, 12, 2, tzinfo=first.resets_at.tzinfo)
    assert first.resets_at.astimezone(UTC) == datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    again = await gate.check(request(person="slack:T1:U2"), rule, NOON + timedelta(hours=1))
    assert again is not None
    assert not again.notify
    # Another surface has its own budget; the next local day starts fresh.
    assert await gate.check(request(surface="C2"), rule, NOON) is None
    assert await gate.check(request(), rule, datetime(2026, 12, 1, 23, 0, tzinfo=UTC)) is None


async def test_person_and_overall_budgets_and_operators(store: OpenStore) -> None:
    gate = budgets(store, person_daily_usd=0.01, daily_tokens=50_000)
    spend = Usage(input_tokens=2000, output_tokens=400)  # 0.006 + 0.006 USD
    await gate.charge(request(), record(NOON, spend))
    refused = await gate.check(request(surface="C9"), None, NOON)
    assert refused is not None
    assert refused.scope == "person"
    assert await gate.check(request(person="slack:T1:U2"), None, NOON) is None
    await gate.charge(request(person=None), record(NOON, Usage(input_tokens=60_000)))
    overall = await gate.check(request(person="slack:T1:U2"), None, NOON)
    assert overall is not None
    assert overall.scope == "overall"
    assert await gate.check(request(person="slack:T1:BOSS"), None, NOON) is None


async def test_a_rule_person_budget_counts_only_that_surface(store: OpenStore) -> None:
    gate = budgets(store)
    rule = BudgetLimits(person_daily_tokens=100)
    await gate.charge(request(surface="C2"), record(NOON, Usage(input_tokens=500)))
    assert await gate.check(request(surface="C1"), rule, NOON) is None
    await gate.charge(request(surface="C1"), record(NOON, Usage(input_tokens=100)))
    assert await gate.check(request(surface="C1"), rule, NOON) is not None


async def test_usage_is_durable_across_a_restart(engine: Engine) -> None:
    first = await engine.open()
    await budgets(first).charge(request(), record(NOON, Usage(input_tokens=5000)))
    await budgets(first).check(request(), BudgetLimits(daily_tokens=10), NOON)
    await first.aclose()
    second = await engine.open()
    try:
        refused = await budgets(second).check(request(), BudgetLimits(daily_tokens=10), NOON)
        assert refused is not None
        assert not refused.notify
        [row] = await second.usage.rows()
        assert row.usage == Usage(input_tokens=5000)
        assert row.model == "claude-sonnet-4-6"
        assert row.cost_usd == pytest.approx(0.015)
    finally:
        await second.aclose()


async def test_a_turn_that_used_nothing_is_not_stored(store: OpenStore) -> None:
    await budgets(store).charge(request(), record(NOON, Usage()))
    assert await store.usage.rows() == []


async def test_a_persons_own_usage_today_against_their_own_limits(store: OpenStore) -> None:
    gate = budgets(store, person_daily_tokens=5000, person_daily_usd=1.0)
    await gate.charge(request(), record(NOON, Usage(input_tokens=2000, output_tokens=400)))
    await gate.charge(request(person="slack:T1:U2"), record(NOON, Usage(input_tokens=9)))
    mine = await gate.personal("slack:T1:U1", NOON)
    assert mine.spent.tokens == 2400
    assert (mine.token_limit, mine.usd_limit) == (5000, 1.0)
    said = replies.usage_report(
        mine.spent.tokens, mine.spent.cost_usd, mine.token_limit, mine.usd_limit, mine.resets_at
    )
    assert "2,400 tokens" in said
    assert "2,600 left" in said
    assert "resets at 2026-12-02 00:00" in said
    boss = await gate.personal("slack:T1:BOSS", NOON)  # operators have no limit of their own
    assert (boss.token_limit, boss.usd_limit) == (None, None)
    assert "no daily limit" in replies.usage_report(0, 0.0, None, None, boss.resets_at)
