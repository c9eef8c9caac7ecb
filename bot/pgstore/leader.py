"""Leadership among replicas (`bot.ports.leadership.Leadership`) with PostgreSQL advisory locks.

A duty is held through a session-level advisory lock on a connection of its own: PostgreSQL
releases it when that session ends, so a replica that is killed hands the duty over as soon as the
server notices its connection is gone (at once for a closed socket; within about half a minute for
a machine that vanished, by the TCP keepalives set here). A waiting replica tries again every
`retry` seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import structlog

from bot.pgstore.db import CONNECT_ERRORS, CONNECT_TIMEOUT

log = structlog.get_logger(__name__)

_KEEPALIVES = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}
_TRY = "SELECT pg_try_advisory_lock(hashtextextended('leader:' || $1, 0))"


class PgLeadership:
    """Duties held by this process, each on its own connection."""

    def __init__(self, url: str, *, retry: float = 2.0) -> None:
        self._url = url
        self._retry = retry
        self._held: dict[str, Any] = {}

    async def acquire(self, duty: str) -> None:
        conn: Any = None
        try:
            while True:
                try:
                    if conn is None or conn.is_closed():
                        conn = await asyncpg.connect(
                            self._url, timeout=CONNECT_TIMEOUT, server_settings=_KEEPALIVES
                        )
                    if await conn.fetchval(_TRY, duty):
                        self._held[duty] = conn
                        conn = None
                        return
                except CONNECT_ERRORS as exc:
                    log.warning("leadership_check_failed", duty=duty, error=type(exc).__name__)
                    conn = None
                await asyncio.sleep(self._retry)
        finally:
            if conn is not None:
                await conn.close()

    async def release(self, duty: str) -> None:
        conn = self._held.pop(duty, None)
        if conn is not None:
            await conn.close()  # ending the session releases its advisory locks
