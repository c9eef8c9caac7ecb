"""The one seam between the store logic and an engine: SQL run on a connection (`Sql`), and a
database that hands one out for a write transaction or for reads (`SqlDatabase`).

SQL written against `Sql` uses `?` placeholders and what SQLite (3.35+) and PostgreSQL both read:
`RETURNING`, `ON CONFLICT ... DO NOTHING / DO UPDATE`, window functions. What differs behind the
seam: the placeholders' spelling, how a statement reports the rows it changed, locks (advisory
locks on PostgreSQL, where replicas write side by side; nothing on SQLite, where a write holds the
whole file) and the byte and row totals (kept by triggers in SQLite's `totals`, summed on
PostgreSQL, where one counter row would serialize every replica's writes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Row(Protocol):
    """A result row, read by column name or position (sqlite3.Row, asyncpg.Record)."""

    def __getitem__(self, key: int | str, /) -> Any: ...


class Sql(Protocol):
    """One connection: inside a write transaction, or (from `SqlDatabase.reads`) for reads."""

    async def execute(self, sql: str, *params: Any) -> int:
        """Run one statement; how many rows it inserted, updated or deleted."""

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row, in order."""

    async def fetch_all(self, sql: str, *params: Any) -> list[Row]: ...

    async def fetch_one(self, sql: str, *params: Any) -> Row | None: ...

    async def fetch_value(self, sql: str, *params: Any) -> Any:
        """The first column of the first row; None when there is no row."""

    async def lock(self, name: str) -> None:
        """Hold `name` until the transaction ends, against other writers taking it."""

    async def try_lock(self, name: str) -> bool:
        """Take `name` until the transaction ends if no other writer holds it; whether it did."""

    async def total(self, name: str) -> int:
        """One of the schema's totals: `conversations`, `history_bytes`, `record_bytes`,
        `attachment_bytes`."""


class SqlDatabase(Protocol):
    """An open store database, as the shared store logic uses it."""

    def reads(self) -> Sql:
        """A connection for reads outside any write (it sees committed data only)."""

    async def transaction(self, op: Callable[[Sql], Awaitable[T]], *, urgent: bool = False) -> T:
        """Run `op` in one write transaction: it commits when `op` returns, rolls back when it
        raises, and once started it finishes even when the caller is cancelled. `urgent` (a
        small write whose delay widens a window, as a part's "delivered" mark does): committed
        ahead of writes queued before it, never grouped with them."""
