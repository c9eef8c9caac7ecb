"""`bot usage`: tokens (input, cache read, cache write, output), cache share and money, grouped by
person, surface or day, from the per-turn usage the store keeps."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.cli.stored import on_store
from bot.usage import GROUPINGS, Line, group, key_of

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.ports.stores import OpenStore

HELP = "report tokens, cache share and money by person, surface, day, agent or model"
_RELATIVE = re.compile(r"^(\d{1,5})([dh])$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--by",
        choices=GROUPINGS,
        default="day",
        help="group the turns by this (default: day)",
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only turns from then on: a date (2026-12-01), an ISO time, or 7d / 24h ago",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace, config: Config) -> int:
    settings = config.settings
    zone = ZoneInfo(settings.budget.timezone or settings.agent.timezone)
    try:
        since = parse_since(args.since, zone, datetime.now(UTC)) if args.since else None
    except ValueError as exc:
        print(f"bot usage: {exc}", file=sys.stderr)
        return 2

    async def report(store: OpenStore) -> int:
        rows = await store.usage.rows(since)
        lines = group(rows, key_of(args.by, zone))
        print(_json(lines) if args.json else table(lines, args.by))
        return 0

    return on_store("usage", config, report, read_only=True)


def parse_since(text: str, zone: ZoneInfo, now: datetime) -> datetime:
    relative = _RELATIVE.match(text.strip())
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        return now - (timedelta(days=amount) if unit == "d" else timedelta(hours=amount))
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--since {text!r} is not a date. Fix: give 2026-12-01, 2026-12-01T09:00, 7d or 24h."
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone)


def table(lines: Sequence[Line], by: str) -> str:
    if len(lines) == 1:
        return "No usage recorded in this period."
    width = max(len(by), *(len(line.key) for line in lines))
    head = (
        f"{by:<{width}} {'turns':>6} {'input':>10} {'cache read':>11} {'cache write':>12} "
        f"{'output':>9} {'cached':>7} {'USD':>10}"
    )
    out = [head]
    for line in lines:
        u = line.usage
        out.append(
            f"{line.key:<{width}} {line.turns:>6} {u.input_tokens:>10} {u.cache_read_tokens:>11} "
            f"{u.cache_write_tokens:>12} {u.output_tokens:>9} {line.cache_share:>7.1%} "
            f"{line.cost_usd:>10.4f}"
        )
    return "\n".join(out)


def _json(lines: Sequence[Line]) -> str:
    return json.dumps(
        [
            {
                "key": line.key,
                "turns": line.turns,
                "input_tokens": line.usage.input_tokens,
                "cache_read_tokens": line.usage.cache_read_tokens,
                "cache_write_tokens": line.usage.cache_write_tokens,
                "output_tokens": line.usage.output_tokens,
                "cache_share": round(line.cache_share, 4),
                "cost_usd": round(line.cost_usd, 6),
            }
            for line in lines
        ],
        indent=2,
        ensure_ascii=False,
    )
