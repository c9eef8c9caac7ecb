"""The one way the inspection commands (history, memory, turns) open the store.

They read an existing database and never create an empty one; a store problem becomes one line on
stderr and exit status 1.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

from bot.config import Config
from bot.store import Store, StoreError, existing_database, open_store

Action = Callable[[Store], Awaitable[int]]


def on_store(command: str, config: Config, action: Action) -> int:
    """Run `action` on the configured store; its int is the exit status."""
    try:
        existing_database(config.settings.store)
        return asyncio.run(_with_store(config, action))
    except (StoreError, ValueError) as exc:
        print(f"bot {command}: {exc}", file=sys.stderr)
        return 1


async def _with_store(config: Config, action: Action) -> int:
    store = await open_store(config.settings.store, config.settings.memory)
    try:
        return await action(store)
    finally:
        await store.aclose()
