"""Writes that finish once started, for both engines' database handles.

A write's transaction runs in a task of its own, shielded from its caller's cancellation: it
commits or rolls back as a whole, so a cancelled turn can never leave half a transaction or a held
lock behind. Closing waits for the writes already started, and refuses new ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog

from bot.errors import StoreClosedError

log = structlog.get_logger(__name__)

T = TypeVar("T")


class ShieldedWrites:
    """The started writes of one open database (named `where` in errors)."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._running: set[asyncio.Task[Any]] = set()
        self._closed = False

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(
                f"{self._where}: the store is closed. Fix: open it again with open_store()."
            )

    async def run(self, transaction: Coroutine[Any, Any, T]) -> T:
        """Run `transaction` to its end, even when the caller is cancelled while it runs."""
        if self._closed:
            transaction.close()
            self.check_open()
        task = asyncio.ensure_future(transaction)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        task.add_done_callback(_log_unretrieved)
        return await asyncio.shield(task)

    async def close(self) -> bool:
        """Refuse new writes and wait for the started ones; False when already closed."""
        if self._closed:
            return False
        self._closed = True
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        return True


def _log_unretrieved(task: asyncio.Task[Any]) -> None:
    # A shielded write whose caller was cancelled has nobody to raise to; retrieve its exception
    # so asyncio does not report it as never retrieved, and log it instead.
    if not task.cancelled() and task.exception() is not None:
        log.debug("store_write_failed", error=type(task.exception()).__name__)
