"""The one way commands open the store: the engine `store.url` / `store.path` selects.

`open_configured` opens PostgreSQL (`bot.store.postgres`) when `store.url` is set, else the SQLite
file (`bot.store.sqlite`). The inspection commands (history, memory, turns) go through `on_store`:
they read an existing store and never create an empty SQLite file; a store problem becomes one line
on stderr and exit status 1.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

from bot.cli.settings import Config
from bot.config import AttachmentSettings, MemorySettings, StoreSettings
from bot.errors import StoreError
from bot.ports.stores import OpenStore
from bot.store.sqlite import existing_database

Action = Callable[[OpenStore], Awaitable[int]]


async def open_configured(
    settings: StoreSettings,
    memory: MemorySettings,
    *,
    attachments: AttachmentSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> OpenStore:
    """Open the configured store, creating or migrating its schema as needed."""
    if settings.url:
        from bot.store.postgres import open_pg_store

        return await open_pg_store(
            settings.url, settings, memory, attachments=attachments, clock=clock
        )
    from bot.store.sqlite import open_store

    return await open_store(settings, memory, attachments=attachments, clock=clock)


def on_store(command: str, config: Config, action: Action) -> int:
    """Run `action` on the configured store; its int is the exit status."""
    try:
        if not config.settings.store.url:
            existing_database(config.settings.store)
        return asyncio.run(_with_store(config, action))
    except (StoreError, ValueError) as exc:
        print(f"bot {command}: {exc}", file=sys.stderr)
        return 1


async def _with_store(config: Config, action: Action) -> int:
    store = await open_configured(config.settings.store, config.settings.memory)
    try:
        return await action(store)
    finally:
        await store.aclose()
