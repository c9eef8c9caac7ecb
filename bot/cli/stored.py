"""The one way commands open the store: the engine `store.url` / `store.path` selects.

`open_configured` opens PostgreSQL (`bot.store.postgres`) when `store.url` is set, else the SQLite
file (`bot.store.sqlite`). The inspection commands (history, memory, turns) go through `on_store`:
they read an existing store and never create an empty SQLite file; a store problem becomes one line
on stderr and exit status 1. Those that only read open it `read_only`: they never take the write
lock, so they answer while a running host holds it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.errors import StoreError

if TYPE_CHECKING:  # the engines are imported when a store opens: see bot/cli/__init__.py
    from bot.cli.settings import Config
    from bot.config import AttachmentSettings, MemorySettings, StoreSettings
    from bot.ports.stores import OpenStore

Action = Callable[["OpenStore"], Awaitable[int]]


async def open_configured(
    settings: StoreSettings,
    memory: MemorySettings,
    *,
    attachments: AttachmentSettings | None = None,
    clock: Callable[[], float] = time.time,
    read_only: bool = False,
) -> OpenStore:
    """Open the configured store, creating or migrating its schema as needed (`read_only`: an
    existing store, read without the write lock)."""
    if settings.url:
        from bot.store.postgres import open_pg_store

        return await open_pg_store(
            settings.url,
            settings,
            memory,
            attachments=attachments,
            clock=clock,
            read_only=read_only,
        )
    from bot.store.sqlite import open_store

    return await open_store(
        settings, memory, attachments=attachments, clock=clock, read_only=read_only
    )


def on_store(command: str, config: Config, action: Action, *, read_only: bool = False) -> int:
    """Run `action` on the configured store; its int is the exit status."""
    import asyncio

    try:
        if not config.settings.store.url:
            from bot.store.sqlite import existing_database

            existing_database(config.settings.store)
        return asyncio.run(_with_store(config, action, read_only))
    except (StoreError, ValueError) as exc:
        print(f"bot {command}: {exc}", file=sys.stderr)
        return 1


async def _with_store(config: Config, action: Action, read_only: bool) -> int:
    settings = config.settings
    store = await open_configured(settings.store, settings.memory, read_only=read_only)
    try:
        return await action(store)
    finally:
        await store.aclose()
