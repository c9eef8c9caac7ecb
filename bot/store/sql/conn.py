"""Helpers over the SQL seam (`bot.ports.sql`): savepoints inside a write, placeholder lists,
and the pruning schedule both engines share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from bot.ports.sql import Sql


async def attempt(tx: Sql, name: str, op: Callable[[Sql], Awaitable[None]]) -> Exception | None:
    """Run `op` in a savepoint of the caller's transaction: when it fails, only its own writes
    are undone and the transaction goes on. Returns its error, or None."""
    await tx.execute(f"SAVEPOINT {name}")
    try:
        await op(tx)
    except Exception as exc:
        await tx.execute(f"ROLLBACK TO SAVEPOINT {name}")
        await tx.execute(f"RELEASE SAVEPOINT {name}")
        return exc
    await tx.execute(f"RELEASE SAVEPOINT {name}")
    return None


def marks(values: Sequence[object]) -> str:
    """As many `?` placeholders as `values`, comma-separated (for `IN (...)`)."""
    return ", ".join("?" * len(values))


class PruneSchedule:
    """Says when old rows are due for pruning: once every `every` writes, so that the common
    path stays a few statements."""

    def __init__(self, every: int) -> None:
        self._every = every
        self._since = 0

    def due(self) -> bool:
        self._since += 1
        if self._since < self._every:
            return False
        self._since = 0
        return True
