"""The overview: turns and errors per minute over the last hour, latency p50/p99, cache share and
spend today against the budgets, and what is running or waiting now. Live."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from bot.console.charts import bar_chart, percentile
from bot.console.pages.common import Console
from bot.ports.records import RecordSummary
from bot.usage import group, key_of

ERRORS = frozenset({"failed", "crashed", "stopped"})
RECENT = 500  # the newest turn records read for the last hour's figures
MINUTES = 60

NAV = ("", "Overview")  # (path, label) in the menu


def install(app: web.Application, console: Console) -> None:
    async def overview(request: web.Request) -> web.Response:
        return console.render.page(
            "overview.html", request, title="Overview", **await figures(console)
        )

    app.router.add_get("/", overview, name="overview")


async def figures(console: Console) -> dict[str, Any]:
    store, now = console.inputs.store, console.now()
    hour_ago = now - timedelta(minutes=MINUTES)
    records = await store.records.recent(limit=RECENT, since=hour_ago)
    today = group(await store.usage.rows(console.today_start()), key_of("agent", console.zone))
    pending = await store.inbox.pending()
    waiting_approvals = await store.approvals.listing(pending=True)
    latencies = [r.latency_ms for r in records]
    budget = console.inputs.budget
    return {
        "turns_chart": bar_chart(_per_minute(records, now, lambda r: True)),
        "errors_chart": bar_chart(_per_minute(records, now, lambda r: r.outcome in ERRORS)),
        "turns_hour": len(records),
        "errors_hour": sum(1 for r in records if r.outcome in ERRORS),
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "today": today[-1],
        "daily_usd": budget.daily_usd,
        "daily_tokens": budget.daily_tokens,
        "running": [
            {
                "key": item.request.conversation_key,
                "channel": item.request.channel,
                "state": "running" if item.attempts else "waiting",
                "since": console.shown(item.request.received_at),
            }
            for item in pending
        ],
        "approvals_waiting": len(waiting_approvals),
        "shown_now": console.shown(now),
    }


def _per_minute(
    records: list[RecordSummary], now: datetime, counts: Callable[[RecordSummary], bool]
) -> list[tuple[str, float]]:
    """Over the last hour, oldest minute first; a label every ten minutes."""
    buckets = [0.0] * MINUTES
    for record in records:
        age = int((now - record.started_at).total_seconds() // 60)
        if 0 <= age < MINUTES and counts(record):
            buckets[MINUTES - 1 - age] += 1
    return [
        (f"-{MINUTES - index}m" if index % 10 == 0 else "", value)
        for index, value in enumerate(buckets)
    ]
