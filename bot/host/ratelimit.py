"""The per-person turn rate: a sliding one-minute window per person, bounded in memory."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0
MAX_PEOPLE = 10_000  # past this, people with no turn in the window are forgotten


class PersonRate:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        """`per_minute` 0 means no limit."""
        self._limit = per_minute
        self._clock = clock
        self._stamps: dict[str, deque[float]] = {}

    def allow(self, person: str | None) -> bool:
        """Count one turn for `person`; False when they are over the rate (nothing counted)."""
        if not person or self._limit == 0:
            return True
        now = self._clock()
        stamps = self._stamps.setdefault(person, deque())
        while stamps and now - stamps[0] > WINDOW_SECONDS:
            stamps.popleft()
        if len(stamps) >= self._limit:
            return False
        stamps.append(now)
        if len(self._stamps) > MAX_PEOPLE:
            self._forget_quiet(now)
        return True

    def _forget_quiet(self, now: float) -> None:
        quiet = [p for p, s in self._stamps.items() if not s or now - s[-1] > WINDOW_SECONDS]
        for person in quiet:
            del self._stamps[person]
