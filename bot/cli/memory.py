"""`bot memory`: search long-term memory across every scope, or forget one entry, for operators."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from bot.cli.stored import on_store

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.ports.memory import StoredMemory
    from bot.ports.stores import OpenStore

HELP = "search or forget long-term memory entries"
LIMIT_MAX = 1_000_000_000  # --limit above this lists everything there is


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    search = actions.add_parser("search", help="find memory entries by keywords (every scope)")
    search.add_argument("query", metavar="QUERY", nargs="+", help="keywords to look for")
    search.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    search.add_argument("--json", action="store_true", help="print JSON instead of text")
    forget = actions.add_parser("forget", help="delete one memory entry by its id")
    forget.add_argument("id", metavar="ID", help="an id printed by `bot memory search`")


def run(args: argparse.Namespace, config: Config) -> int:
    read_only = args.action == "search"
    return on_store("memory", config, lambda store: _run(args, store), read_only=read_only)


async def _run(args: argparse.Namespace, store: OpenStore) -> int:
    if args.action == "forget":
        if await store.memory.forget(args.id):
            print(f"Forgot memory {args.id}.")
            return 0
        print(f"bot memory forget: no memory with id {args.id}", file=sys.stderr)
        return 1
    limit = min(max(1, args.limit), LIMIT_MAX)  # a number past 64 bits means "all"
    found = await store.memory.search(" ".join(args.query), limit=limit)
    if args.json:
        print(json.dumps([_as_json(item) for item in found], indent=2, ensure_ascii=False))
    elif not found:
        print("No memory entry matches.")
    else:
        print("\n\n".join(_as_text(item) for item in found))
    return 0


def _as_text(item: StoredMemory) -> str:
    when = item.captured_at.strftime("%Y-%m-%d %H:%M")
    header = (
        f"#{item.id} · {when} UTC · heard in {item.surface} · {item.conversation_key}"
        f" · origin {item.origin}"
    )
    body = "\n".join("    " + line for line in item.text.splitlines())
    return f"{header}\n{body}"


def _as_json(item: StoredMemory) -> dict[str, object]:
    return {
        "id": item.id,
        "captured_at": item.captured_at.isoformat(),
        "surface": item.surface,
        "conversation_key": item.conversation_key,
        "text": item.text,
        "origin": str(item.origin),
    }
