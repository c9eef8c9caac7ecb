"""`/metrics` per channel: token kinds (for each channel's cache hit rate) and cost, and the example
alert rule in deploy/ only names series the host really exports."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.metrics import Metrics
from bot.policy.budget import Budgets, BudgetSettings
from bot.ports.records import Spent, TurnRecord, Usage, UsageEntry

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
AT = datetime(2026, 12, 1, 9, tzinfo=UTC)


class NoLedger:
    async def add(self, entry: UsageEntry) -> None: ...

    async def spent(
        self, since: datetime, *, surface: str | None = None, person: str | None = None
    ) -> Spent:
        return Spent()

    async def first_notice(self, scope: str, period: str) -> bool:
        return True


def record(channel: str, usage: Usage) -> TurnRecord:
    return TurnRecord(
        "t", "k", channel, AT, AT, "ok", request={"model": "claude-sonnet-4-6"}, usage=usage
    )


def exported() -> str:
    budgets = Budgets(BudgetSettings(), NoLedger(), timezone="UTC", default_model="x")
    metrics = Metrics(lambda: 0, dict, cost=budgets.cost_of)
    metrics.observe(record("slack", Usage(1000, 9000, 0, 100)))
    metrics.observe(record("telegram", Usage(1000, 0, 2000, 100, cache_write_1h_tokens=2000)))
    metrics.observe(record("telegram", Usage()))
    return metrics.render().decode()


def value(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, flags=re.MULTILINE)
    assert match, f"{series} is not exported"
    return float(match.group(1))


def test_tokens_and_cost_are_counted_per_channel() -> None:
    text = exported()
    assert value(text, 'bot_channel_tokens_total{channel="slack",kind="cache_read"}') == 9000
    assert value(text, 'bot_channel_tokens_total{channel="telegram",kind="cache_write"}') == 2000
    # 1000 input at $3/M + 9000 cache reads at $0.30/M + 100 output at $15/M
    assert value(text, 'bot_cost_usd_total{channel="slack"}') == pytest.approx(0.0072)
    # 1-hour cache writes cost twice the input price
    telegram = value(text, 'bot_cost_usd_total{channel="telegram"}')
    assert abs(telegram - (0.003 + 2000 * 6 / 1e6 + 0.0015)) < 1e-12


def test_the_example_alert_uses_only_exported_series() -> None:
    rules = (DEPLOY / "prometheus-alerts.yaml").read_text(encoding="utf-8")
    text = exported()
    names = set(re.findall(r"\b(bot_[a-z_]+)\{", rules)) | set(
        re.findall(r"\b(bot_[a-z_]+)\[", rules)
    )
    assert names == {"bot_channel_tokens_total", "bot_cost_usd_total"}
    for name in names:
        assert re.search(rf"^{name}\{{", text, flags=re.MULTILINE), name
    for kind in re.findall(r'kind=~?"([a-z_|]+)"', rules):
        for one in kind.split("|"):
            assert f'kind="{one}"' in text
