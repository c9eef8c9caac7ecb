"""Usage totals: per-turn usage rows grouped by person, surface, day, agent or model, each group
with its turns, tokens, cache share and money. The one computation `bot usage` prints and the
console draws, so both always show the same figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from bot.ports.records import Usage, UsageEntry

GROUPINGS = ("day", "surface", "person", "agent", "model")
NOBODY = "(nobody: console or scheduled)"
AGENT = "default"  # one agent today: every turn is its


@dataclass
class Line:
    """One group's totals."""

    key: str
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0

    def add(self, row: UsageEntry) -> None:
        self.turns += 1
        self.usage += row.usage
        self.cost_usd += row.cost_usd

    @property
    def cache_share(self) -> float:
        """The share of input tokens read from the cache."""
        u = self.usage
        read_or_not = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
        return u.cache_read_tokens / read_or_not if read_or_not else 0.0


def key_of(by: str, zone: ZoneInfo) -> Callable[[UsageEntry], str]:
    """What a row is grouped by: one of GROUPINGS."""
    if by == "person":
        return lambda row: row.person or NOBODY
    if by == "surface":
        return lambda row: row.surface
    if by == "agent":
        return lambda row: AGENT
    if by == "model":
        return lambda row: row.model
    return lambda row: row.at.astimezone(zone).date().isoformat()


def group(rows: Sequence[UsageEntry], key: Callable[[UsageEntry], str]) -> list[Line]:
    """Totals per key, sorted by key, then the total of everything as the last line."""
    lines: dict[str, Line] = {}
    total = Line("total")
    for row in rows:
        lines.setdefault(key(row), Line(key(row))).add(row)
        total.add(row)
    return [*(lines[k] for k in sorted(lines)), total]
