"""`bot turns`: show one turn record (the request as sent, usage, outcome) or list recent ones."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bot.cli.stored import on_store

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.ports.records import RecordSummary
    from bot.ports.stores import OpenStore

HELP = "show turn records (the exact requests sent, usage, outcome)"
LIMIT_MAX = 1_000_000_000  # --limit above this lists everything there is


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print one turn record, with the request as sent")
    show.add_argument("turn_id", metavar="ID", help="the turn id (from `bot turns list` or logs)")
    show.add_argument("--json", action="store_true", help="print the record as JSON")
    listing = actions.add_parser("list", help="list recent turns, newest first")
    listing.add_argument("--conversation", metavar="KEY", help="only this conversation's turns")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace, config: Config) -> int:
    return on_store("turns", config, lambda store: _run(args, store), read_only=True)


async def _run(args: argparse.Namespace, store: OpenStore) -> int:
    if args.action == "show":
        stored = await store.records.show(args.turn_id)
        if stored is None:
            print(f"bot turns show: no record of turn {args.turn_id!r}", file=sys.stderr)
            return 1
        from bot.logs import redact_value

        # Redacted again with today's configured secrets: a record written before a secret was
        # configured (or by an older version) still never shows it.
        record = redact_value(stored, ())
        print(json.dumps(record, indent=2, ensure_ascii=False) if args.json else _text(record))
        return 0
    limit = min(max(1, args.limit), LIMIT_MAX)  # a number past 64 bits means "all"
    summaries = await store.records.recent(args.conversation, limit=limit)
    if args.json:
        print(json.dumps([_summary_json(s) for s in summaries], indent=2, ensure_ascii=False))
    elif not summaries:
        print("No turn records.")
    else:
        print(f"{'started (UTC)':<20} {'outcome':<10} {'ms':>8} {'in':>7} {'out':>6}  turn id")
        print("\n".join(_summary_line(s) for s in summaries))
    return 0


def _text(record: Mapping[str, Any]) -> str:
    usage = record.get("usage") or {}
    lines = [
        f"turn          {record['turn_id']}",
        f"conversation  {record['conversation_key']} ({record.get('channel')})",
        f"started       {record['started_at']}",
        f"outcome       {record['outcome']}"
        + (f" (error: {record['error']})" if record.get("error") else ""),
        f"latency       {record.get('latency_ms')} ms over {record.get('attempts')} attempt(s)",
        "usage         "
        + ", ".join(f"{name.removesuffix('_tokens')} {value}" for name, value in usage.items()),
    ]
    if record.get("details"):
        lines.append(f"details       {json.dumps(record['details'], ensure_ascii=False)}")
    request = record.get("request")
    lines.append("")
    lines.append(
        "request as sent (secrets redacted):\n" + json.dumps(request, indent=2, ensure_ascii=False)
        if request is not None
        else "no request was sent"
    )
    return "\n".join(lines)


def _summary_line(summary: RecordSummary) -> str:
    started = summary.started_at.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{started:<20} {summary.outcome:<10} {summary.latency_ms:>8.0f} "
        f"{summary.input_tokens:>7} {summary.output_tokens:>6}  {summary.turn_id}"
    )


def _summary_json(summary: RecordSummary) -> dict[str, object]:
    return {
        "turn_id": summary.turn_id,
        "conversation_key": summary.conversation_key,
        "started_at": summary.started_at.isoformat(),
        "outcome": summary.outcome,
        "latency_ms": summary.latency_ms,
        "input_tokens": summary.input_tokens,
        "output_tokens": summary.output_tokens,
    }
