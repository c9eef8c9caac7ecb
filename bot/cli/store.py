"""`bot store migrate --to postgresql://...`: copy the SQLite store into PostgreSQL, then verify.

Run it with `bot run` stopped (the copy is a snapshot of each table). The target database must
exist and be empty of bot data; its schema is created here. Every table is copied in one
transaction, then each table's row count is compared with the source's: the command says which
match and exits non-zero unless all do. Then set `store.url` to the same URL and start the
replicas.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rest is imported where it runs: see bot/cli/__init__.py
    from bot.cli.settings import Config

HELP = "copy the SQLite store into PostgreSQL (bot store migrate --to URL)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    migrate = actions.add_parser(
        "migrate", help="copy history, memory, turn records, the ledger and the rest, then verify"
    )
    migrate.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="postgresql://user@host:port/database (the password in PGPASSWORD, not the URL)",
    )
    migrate.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        metavar="PATH",
        help="the SQLite file (default: store.path from the config)",
    )


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    from bot.config import check_store_url

    source = (args.source or config.settings.store.path).expanduser()
    try:
        url = check_store_url(args.to)
    except ValueError as exc:
        print(f"bot store migrate: --to {exc}.", file=sys.stderr)
        return 2
    if not source.is_file():
        print(
            f"bot store migrate: {source}: no SQLite store here. Fix: pass --from PATH or "
            "--config with the store.path of the store to copy.",
            file=sys.stderr,
        )
        return 1
    return asyncio.run(_migrate(config, source, url))


async def _migrate(config: Config, source: Path, url: str) -> int:
    from bot.errors import StoreError
    from bot.store.postgres import open_pg_store
    from bot.store.postgres.importer import count_rows, import_tables
    from bot.store.sqlite.export import TABLES, export_tables
    from bot.store.sqlite.export import count_rows as count_source

    settings = config.settings
    try:
        expected = await count_source(source)
        target = await open_pg_store(url, settings.store, settings.memory)
        try:
            await import_tables(target.db, export_tables(source))
            copied = await count_rows(target.db, TABLES)
        finally:
            await target.aclose()
    except StoreError as exc:
        print(f"bot store migrate: {exc}", file=sys.stderr)
        return 1
    return _report(source, target.where, expected, copied)


def _report(source: Path, where: str, expected: dict[str, int], copied: dict[str, int]) -> int:
    width = max(len(table) for table in expected)
    bad = 0
    print(f"Copied {source} into {where}:")
    for table, count in expected.items():
        ok = copied.get(table) == count
        bad += not ok
        mark = "ok  " if ok else "FAIL"
        print(f"  {mark}  {table:<{width}}  {count} -> {copied.get(table, 0)}")
    if bad:
        print(f"\n{bad} table(s) differ: the copy is not complete.", file=sys.stderr)
        return 1
    print("\nEvery count matches. Set store.url to this URL and start `bot run`.")
    return 0
