"""Usage: tokens, cache share and money per day, surface, person, agent and model over a window
of days (or one day), as SVG charts and tables, and as CSV. The figures are `bot usage`'s: the
same rows from the store, grouped by the same code (`bot.usage`)."""

from __future__ import annotations

import csv
import io
from datetime import date, datetime, timedelta
from typing import Any

from aiohttp import web

from bot.console.charts import bar_chart
from bot.console.pages.common import Console, query_int
from bot.ports.records import UsageEntry
from bot.usage import GROUPINGS, Line, group, key_of

NAV = ("usage", "Usage")
COLUMNS = (
    "key",
    "turns",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cache_share",
    "cost_usd",
)


def install(app: web.Application, console: Console) -> None:
    async def page(request: web.Request) -> web.Response:
        window = _window(console, request)
        rows = await _rows(console, window)
        tables = {by: group(rows, key_of(by, console.zone)) for by in GROUPINGS}
        days = _every_day(tables["day"][:-1], window, console)
        return console.render.page(
            "usage.html",
            request,
            title="Usage",
            tables=tables,
            window=window,
            total=tables["day"][-1],
            cost_chart=bar_chart([(key[5:], line.cost_usd) for key, line in days], " USD", 4),
            tokens_chart=bar_chart([(key[5:], float(line.usage.total)) for key, line in days]),
            surface_chart=bar_chart(
                [(line.key, line.cost_usd) for line in tables["surface"][:-1]], " USD", 4
            ),
        )

    async def download(request: web.Request) -> web.Response:
        window = _window(console, request)
        by = request.query.get("by", "day")
        if by not in GROUPINGS:
            by = "day"
        lines = group(await _rows(console, window), key_of(by, console.zone))
        response = web.Response(text=_csv(lines, by), content_type="text/csv")
        response.headers["Content-Disposition"] = f'attachment; filename="usage-{by}.csv"'
        return response

    app.router.add_get("/usage", page, name="usage")
    app.router.add_get("/usage.csv", download, name="usage_csv")


def _window(console: Console, request: web.Request) -> dict[str, Any]:
    """The days shown: one day (`day=YYYY-MM-DD`) or the last `days` (default 30)."""
    try:
        day = date.fromisoformat(request.query.get("day", ""))
    except ValueError:
        day = None
    if day is not None:
        start = datetime(day.year, day.month, day.day, tzinfo=console.zone)
        return {"day": day.isoformat(), "days": 1, "start": start, "end": start + timedelta(1)}
    days = query_int(request, "days", 30, 1, 366)
    return {"day": "", "days": days, "start": console.days_ago(days), "end": None}


def _every_day(
    lines: list[Line], window: dict[str, Any], console: Console
) -> list[tuple[str, Line]]:
    """A line for every day of the window, days without turns included (as zero)."""
    by_day = {line.key: line for line in lines}
    first = window["start"].date()
    count = window["days"] if window["day"] else (console.today_start().date() - first).days + 1
    keys = [(first + timedelta(days=n)).isoformat() for n in range(max(count, 1))]
    return [(key, by_day.get(key, Line(key))) for key in keys]


async def _rows(console: Console, window: dict[str, Any]) -> list[UsageEntry]:
    rows = await console.inputs.store.usage.rows(window["start"])
    end = window["end"]
    return [row for row in rows if end is None or row.at < end]


def _csv(lines: list[Line], by: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([by if c == "key" else c for c in COLUMNS])
    for line in lines:
        u = line.usage
        writer.writerow(
            [
                _cell(line.key),
                line.turns,
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.output_tokens,
                round(line.cache_share, 4),
                round(line.cost_usd, 6),
            ]
        )
    return out.getvalue()


def _cell(text: str) -> str:
    """A spreadsheet never reads a cell people named as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
