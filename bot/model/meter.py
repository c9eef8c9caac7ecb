"""One turn's spend as the runtime counts it: the usage of its calls, estimates charged for
attempts that may have been billed without an answer, and token estimates of its text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import structlog

from bot.ports.model import Counter
from bot.ports.records import Usage
from bot.prompt.history import entry_tokens
from bot.turns import HistoryEntry

log = structlog.get_logger(__name__)


class Meter:
    """The usage of one turn's calls so far, and its token estimates."""

    def __init__(
        self, counter: Counter | None, on_charge: Callable[[Usage], None] | None, turn_id: str
    ) -> None:
        self.counter = counter
        self.usage = Usage()
        self._on_charge = on_charge
        self.turn_id = turn_id

    def charge(self, usage: Usage) -> None:
        """An attempt that failed after it may have been billed: counted in the turn's usage
        and told to the host at once (a cancelled turn returns nothing else)."""
        log.info("model_call_charged", estimated_tokens=usage.total, turn_id=self.turn_id)
        self.usage += usage
        if self._on_charge is not None:
            self._on_charge(usage)

    def count(self, text: str) -> int:
        return self.counter.count(text) if self.counter is not None else len(text) // 4 + 1

    def counted(self, entry: HistoryEntry) -> HistoryEntry:
        """The entry with its token estimate cached, so history is never re-tokenized."""
        if self.counter is None:
            return entry
        return replace(entry, tokens=entry_tokens(entry, self.counter.count))
