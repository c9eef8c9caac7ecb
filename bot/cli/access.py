"""`bot access approve CODE | list | revoke PERSON`: pairing (SPEC §19), the people admitted
with a one-time code beside the allowlists (`[access] unknown = "pair"`)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.cli.stored import on_store

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.ports.stores import OpenStore

HELP = "admit a person by their pairing code, list who is admitted, or revoke an admission"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    approve = actions.add_parser("approve", help="admit the person a code was given to")
    approve.add_argument("code", metavar="CODE", help="the code the person was sent (ABCD-EFGH)")
    actions.add_parser("list", help="the people admitted, and the codes still waiting")
    revoke = actions.add_parser("revoke", help="take an admission back")
    revoke.add_argument("person", metavar="PERSON", help="as `bot access list` shows it")


def run(args: argparse.Namespace, config: Config) -> int:
    read_only = args.action == "list"
    return on_store("access", config, lambda store: _run(args, store), read_only=read_only)


async def _run(args: argparse.Namespace, store: OpenStore) -> int:
    if args.action == "approve":
        admitted = await store.access.approve(args.code)
        if admitted is None:
            print(
                "bot access: no such code waiting (unknown, used or expired after an hour). "
                "Fix: ask the person to write to the bot again for a new code.",
                file=sys.stderr,
            )
            return 1
        print(f"Admitted {admitted.person} ({_one_line(admitted.label)}).")
        return 0
    if args.action == "revoke":
        if not await store.access.revoke(args.person):
            print(
                f"bot access: {args.person} is not admitted. Fix: see `bot access list`.",
                file=sys.stderr,
            )
            return 1
        print(f"Revoked {args.person}.")
        return 0
    people, asking = await store.access.people(), await store.access.asking()
    print("Admitted:" if people else "Nobody is admitted by code.")
    for person in people:
        print(f"  {person.person:<24} {_when(person.admitted_at)}  {_one_line(person.label)}")
    if asking:
        print("Codes waiting (the codes themselves are not stored):")
    for ask in asking:
        print(f"  {ask.person:<24} expires {_when(ask.expires_at)}  {_one_line(ask.label)}")
    return 0


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _one_line(label: str) -> str:
    """A name someone chose, shown on one line without terminal control characters."""
    return "".join(c if c.isprintable() else " " for c in label)[:80]
