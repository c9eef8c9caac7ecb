"""`bot approvals [--pending]`: the approval requests, newest first, with their decisions."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.cli.stored import on_store

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.ports.approvals import Approval
    from bot.ports.stores import OpenStore

HELP = "list tool calls waiting for (or decided by) an approver"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pending", action="store_true", help="only those still waiting")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace, config: Config) -> int:
    return on_store("approvals", config, lambda store: _run(args, store), read_only=True)


async def _run(args: argparse.Namespace, store: OpenStore) -> int:
    found = await store.approvals.listing(pending=args.pending)
    if args.json:
        print(json.dumps([_json(a) for a in found], indent=2, ensure_ascii=False))
    elif not found:
        print("No pending approvals." if args.pending else "No approvals.")
    else:
        print(f"{'asked (UTC)':<17} {'state':<9} {'tool':<28} {'requester':<22} decided by / id")
        print("\n".join(_line(a) for a in found))
    return 0


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


def _line(a: Approval) -> str:
    decided = (
        f"{a.decided_by} {_when(a.decided_at)}"
        if a.decided_by
        else f"expires {_when(a.expires_at)}"
    )
    return (
        f"{_when(a.created_at):<17} {a.state:<9} {a.tool:<28} {a.requester:<22} {decided}  {a.id}\n"
        f"{'':<17} arguments {a.arguments[:200]}"
    )


def _json(a: Approval) -> dict[str, object]:
    return {
        "id": a.id,
        "turn_id": a.turn_id,
        "conversation_key": a.conversation_key,
        "tool": a.tool,
        "arguments": json.loads(a.arguments),
        "sha256": a.digest,
        "requester": a.requester,
        "approvers": list(a.approvers),
        "state": a.state,
        "created_at": _when(a.created_at),
        "expires_at": _when(a.expires_at),
        "decided_by": a.decided_by,
        "decided_at": _when(a.decided_at),
    }
