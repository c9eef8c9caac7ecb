"""`bot history`: show one conversation's stored history, list conversations, or reset one."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.cli.stored import on_store
from bot.turns import AttachmentBlock, Block, HistoryEntry, TextBlock, ToolUseBlock

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.ports.history import ConversationInfo
    from bot.ports.stores import OpenStore

HELP = "show or reset one conversation's stored history"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print a conversation's history, or --list them all")
    show.add_argument("key", nargs="?", metavar="KEY", help="the exact conversation key")
    show.add_argument("--list", action="store_true", help="list every stored conversation")
    show.add_argument("--json", action="store_true", help="print JSON instead of text")
    reset = actions.add_parser("reset", help="forget one conversation's history")
    reset.add_argument("key", metavar="KEY", help="the exact conversation key")


def run(args: argparse.Namespace, config: Config) -> int:
    if args.action == "show" and not args.list and not args.key:
        print("bot history show: give a conversation KEY, or --list", file=sys.stderr)
        return 2
    read_only = args.action == "show"
    return on_store("history", config, lambda store: _run(args, store), read_only=read_only)


async def _run(args: argparse.Namespace, store: OpenStore) -> int:
    if args.action == "reset":
        if await store.history.reset(args.key):
            print(f"Forgot the history of {args.key}.")
            return 0
        print(f"bot history reset: no stored conversation {args.key!r}", file=sys.stderr)
        return 1
    if args.list:
        return await _list(store, as_json=args.json)
    return await _show(store, args.key, as_json=args.json)


async def _list(store: OpenStore, *, as_json: bool) -> int:
    conversations = await store.history.describe()
    if as_json:
        print(json.dumps([_info_json(info) for info in conversations], indent=2))
        return 0
    if not conversations:
        print("No stored conversations.")
        return 0
    print(f"{'last active (UTC)':<20} {'messages':>8} {'bytes':>10}  key")
    for info in conversations:
        print(f"{_when(info.last_active):<20} {info.messages:>8} {info.bytes:>10}  {info.key}")
    return 0


async def _show(store: OpenStore, key: str, *, as_json: bool) -> int:
    entries = await store.history.load(key)
    if not entries and key not in await store.history.conversations():
        print(f"bot history show: no stored conversation {key!r}", file=sys.stderr)
        return 1
    if as_json:
        from bot.store.sql.codec import encode_entry

        stored = [json.loads(encode_entry(entry)) for entry in entries]
        print(json.dumps(stored, indent=2, ensure_ascii=False))
        return 0
    print(f"{key}: {len(entries)} messages")
    for number, entry in enumerate(entries, 1):
        print()
        print(_header(number, entry))
        for block in entry.blocks:
            print(_indented(_block_text(block)))
    return 0


def _header(number: int, entry: HistoryEntry) -> str:
    parts = [f"[{number}] {entry.role}"]
    if entry.summary:
        parts.append("summary")
    if entry.speaker:
        parts.append(entry.speaker)
    if entry.at:
        parts.append(entry.at.isoformat(timespec="seconds"))
    parts.append(f"{entry.tokens} tokens")
    return " · ".join(parts)


def _block_text(block: Block) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, AttachmentBlock):
        from bot.prompt.attachments import marker as attachment_marker

        return attachment_marker(block)
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(dict(block.input), ensure_ascii=False)
        return f"-> tool call {block.name} ({block.id}): {arguments}"
    marker = "tool error" if block.is_error else "tool result"
    return f"<- {marker} ({block.tool_use_id}): {block.content}"


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines() or [""])


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _info_json(info: ConversationInfo) -> dict[str, object]:
    return {
        "key": info.key,
        "last_active": datetime.fromtimestamp(info.last_active, UTC).isoformat(),
        "messages": info.messages,
        "bytes": info.bytes,
    }
