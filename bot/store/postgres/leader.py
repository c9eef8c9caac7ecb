"""Leadership among replicas (`bot.ports.leadership.Leadership`) with PostgreSQL advisory locks.

A duty is held through a session-level advisory lock on a connection of its own: PostgreSQL
releases it when that session ends, so a replica that is killed hands the duty over as soon as the
server notices its connection is gone (at once for a closed socket; within about half a minute for
a machine that vanished, by the TCP keepalives set here). A waiting replica tries again every
`retry` seconds.

A live holder can lose a duty too: a database restart or a dropped connection ends its session. Each
held duty's connection is checked every `retry` seconds; a lost one is reported (`holds` turns
false, `leadership_lost` is logged) and taken again as soon as nobody else holds it. Without this a
replica whose heartbeat (`bot.store.postgres.owners`) was cut would be taken for dead forever while
it runs, and replicas would take each other's conversations back and forth after every restart.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import structlog

from bot.store.postgres.db import CONNECT_ERRORS, CONNECT_TIMEOUT
from bot.store.postgres.locks import key

log = structlog.get_logger(__name__)

_KEEPALIVES = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}
_TRY = "SELECT pg_try_advisory_lock(" + key("'leader:' || $1") + ")"


class _Duty:
    """A duty this process holds, or lost and is taking back: the connection whose session holds
    it (None while lost), and the keeper watching that session."""

    def __init__(self, conn: Any) -> None:
        self.conn: Any = conn
        self.regained = asyncio.Event()  # set while `conn` holds the duty
        self.regained.set()
        self.keeper: asyncio.Task[None] | None = None


class PgLeadership:
    """Duties held by this process, each on its own connection, each kept by a watcher."""

    def __init__(self, url: str, *, retry: float = 2.0) -> None:
        self._url = url
        self._retry = retry
        self._duties: dict[str, _Duty] = {}

    async def acquire(self, duty: str) -> None:
        if (kept := self._duties.get(duty)) is not None:  # held, or lost and being taken again
            await kept.regained.wait()
            return
        kept = self._duties[duty] = _Duty(await self._take(duty))
        kept.keeper = asyncio.create_task(self._keep(kept, duty), name=f"leadership-{duty}")

    def holds(self, duty: str) -> bool:
        kept = self._duties.get(duty)
        return kept is not None and kept.conn is not None

    async def release(self, duty: str) -> None:
        kept = self._duties.pop(duty, None)
        if kept is None:
            return
        if kept.keeper is not None:
            kept.keeper.cancel()
            # Bounded, so that stopping never hangs on a probe the driver is slow to give up
            # (a cancelled caller still raises here).
            await asyncio.wait([kept.keeper], timeout=CONNECT_TIMEOUT)
            if kept.keeper.done() and not kept.keeper.cancelled():
                # A probe or a take cut off mid-query can end in asyncpg's own errors; the
                # duty's session is ended below whatever the keeper was doing.
                kept.keeper.exception()
        if kept.conn is not None:
            await _end(kept.conn)  # ending the session releases its advisory locks

    async def _take(self, duty: str) -> Any:
        """A connection whose session holds `duty`, once nobody else holds it."""
        conn: Any = None
        try:
            while True:
                try:
                    if conn is None or conn.is_closed():
                        conn = await asyncpg.connect(
                            self._url, timeout=CONNECT_TIMEOUT, server_settings=_KEEPALIVES
                        )
                    if await conn.fetchval(_TRY, duty):
                        taken, conn = conn, None
                        return taken
                except CONNECT_ERRORS as exc:
                    log.warning("leadership_check_failed", duty=duty, error=type(exc).__name__)
                    if conn is not None:
                        await _end(conn)
                        conn = None
                await asyncio.sleep(self._retry)
        finally:
            if conn is not None:
                await _end(conn)

    async def _keep(self, kept: _Duty, duty: str) -> None:
        """Check the duty's session every `retry` seconds; take the duty again when it ended."""
        while True:
            await asyncio.sleep(self._retry)
            if kept.conn is not None:
                if await _alive(kept.conn):
                    continue
                lost, kept.conn = kept.conn, None
                kept.regained.clear()
                log.warning("leadership_lost", duty=duty)
                await _end(lost)
            try:
                kept.conn = await self._take(duty)
            except Exception as exc:  # whatever went wrong, the next round tries again
                log.warning("leadership_check_failed", duty=duty, error=type(exc).__name__)
                continue
            kept.regained.set()
            log.info("leadership_regained", duty=duty)


async def _alive(conn: Any) -> bool:
    """Whether the session behind `conn` still answers (and so still holds its locks)."""
    if conn.is_closed():
        return False
    try:
        await asyncio.wait_for(conn.fetchval("SELECT 1"), CONNECT_TIMEOUT)
    except asyncio.CancelledError:
        if _stopping():
            raise
        return False  # the driver gave the probe up itself: the connection was lost under it
    except (*CONNECT_ERRORS, asyncpg.exceptions.InternalClientError):
        return False
    return True


def _stopping() -> bool:
    """Whether this task itself is being cancelled (not a cancellation from inside the driver)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _end(conn: Any) -> None:
    """End a duty's session: politely when it answers, else by dropping the connection (a
    connection cut off mid-query, or one whose server is gone, cannot close politely)."""
    try:
        await asyncio.wait_for(conn.close(), CONNECT_TIMEOUT)
    except (*CONNECT_ERRORS, asyncpg.exceptions.InternalClientError):
        conn.terminate()
