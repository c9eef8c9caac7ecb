"""Cron schedules: a validated 5-field expression in an IANA timezone, and its real fire instants.

croniter matches wall-clock times; this module turns those into instants, the way cron has long
behaved across daylight-saving changes:

- spring forward: a wall time the jump skips still fires, once, shifted forward by the jump
  (02:30 on Berlin's spring-forward day fires at 03:30 CEST; it is zoneinfo's `fold=0` reading of
  a missing time);
- fall back: a wall time that occurs twice fires once, at its first occurrence, unless the hour
  field is `*`: a job that runs every hour (or more often) keeps its pace through the repeated hour.

Instants come out strictly increasing and timezone-aware in UTC.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from bot.errors import ScheduleError

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
EXAMPLE = "0 9 * * 1-5"
# How far a zone's UTC offset moves at one change, at most (real changes are 30 min to 2 h): the
# wall-time walk looks at the offsets this far around it so the instants come out in order.
_MARGIN = timedelta(hours=3)
_SECOND = timedelta(seconds=1)
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class Schedule:
    """A cron expression read in one timezone. Build it with `Schedule.parse`."""

    expression: str
    timezone: str
    _zone: ZoneInfo = field(repr=False, compare=False)
    _every_hour: bool = field(repr=False, compare=False)

    @classmethod
    def parse(cls, expression: str, timezone: str) -> Schedule:
        zone = _zone(timezone)
        text = " ".join(expression.split())
        _check_shape(text)
        try:
            expanded = croniter(text).expanded
        except CroniterError as exc:
            raise ScheduleError(
                f"{expression!r} is not a valid cron expression ({exc}). Fix: write five fields, "
                f"{' '.join(FIELDS)}, e.g. {EXAMPLE!r}."
            ) from None
        schedule = cls(text, timezone, zone, _hour_is_wildcard(expanded[1]))
        schedule._check_reachable()
        return schedule

    def next_after(self, instant: datetime) -> datetime:
        """The first fire instant strictly after `instant` (an aware datetime), in UTC."""
        return next(self.fires_after(instant))

    def latest_in(self, start: datetime, end: datetime) -> datetime | None:
        """The last fire instant in `(start, end]`, or None when there is none."""
        latest: datetime | None = None
        for instant in self.fires_after(start):
            if instant > end:
                break
            latest = instant
        return latest

    def local(self, instant: datetime) -> datetime:
        """`instant` on this schedule's wall clock."""
        return instant.astimezone(self._zone)

    def fires_after(self, instant: datetime) -> Iterator[datetime]:
        """Every fire instant strictly after `instant`, in order, in UTC."""
        after = _aware(instant).astimezone(UTC)
        lowest, _ = self._offsets_near(after)
        # A wall time can only fire after `after` if it is later than `after` on the slowest
        # clock nearby; in the repeated hour of a fall-back that is earlier than the clock now.
        walk = croniter(self.expression, after.replace(tzinfo=None) + lowest - _SECOND)
        pending: list[datetime] = []
        last = after
        while True:
            candidate = _next_wall(walk, self.expression)
            for fire in self._instants(candidate):
                if fire > last:
                    heapq.heappush(pending, fire)
            # Nothing later in the walk can land before this bound, so what lies below it is final.
            _, highest = self._offsets_near(candidate.replace(tzinfo=self._zone).astimezone(UTC))
            bound = candidate.replace(tzinfo=UTC) - highest
            while pending and pending[0] < bound:
                fire = heapq.heappop(pending)
                if fire > last:
                    last = fire
                    yield fire

    def _offsets_near(self, instant: datetime) -> tuple[timedelta, timedelta]:
        """The smallest and largest UTC offset within `_MARGIN` of `instant`."""
        offsets = [
            _offset((instant + delta).astimezone(self._zone))
            for delta in (-_MARGIN, timedelta(0), _MARGIN)
        ]
        return min(offsets), max(offsets)

    def _instants(self, wall: datetime) -> list[datetime]:
        first = wall.replace(tzinfo=self._zone, fold=0)
        second = wall.replace(tzinfo=self._zone, fold=1)
        if first.utcoffset() == second.utcoffset():
            return [first.astimezone(UTC)]
        repeated = first.astimezone(UTC).astimezone(self._zone).replace(tzinfo=None) == wall
        if repeated and self._every_hour:
            return [first.astimezone(UTC), second.astimezone(UTC)]
        # A repeated time fires at its first occurrence; a skipped one reads with the offset from
        # before the jump, which lands it the jump's length later on the new wall clock.
        return [first.astimezone(UTC)]

    def _check_reachable(self) -> None:
        try:
            croniter(self.expression, datetime(2000, 1, 1)).get_next(datetime)
        except CroniterBadDateError:
            raise ScheduleError(
                f"{self.expression!r} never fires (no calendar date matches its day-of-month and "
                f"month fields). Fix: choose a date that exists, e.g. {EXAMPLE!r}."
            ) from None


def _zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"timezone {timezone!r} is not a known IANA timezone. Fix: use a name such as "
            "'Europe/Berlin' or 'UTC'."
        ) from None


def _check_shape(text: str) -> None:
    if text.lower() in _ALIASES:
        raise ScheduleError(
            f"{text!r} is a shorthand this host does not read. Fix: write the five fields, "
            f"{_ALIASES[text.lower()]!r}."
        )
    count = len(text.split())
    if any(
        part.upper() == "R" or part.upper().startswith("R(") for part in re.split(r"[\s,]", text)
    ):
        # croniter draws a new random value on every read: `bot cron list` would show a
        # different next time each call, and a restart would move the job.
        raise ScheduleError(
            f"{text!r} uses R (a random value), which would move on every read and restart. "
            f"Fix: write the value you want, e.g. {EXAMPLE!r}."
        )
    if count != 5:
        raise ScheduleError(
            f"{text!r} has {count} field{'s' if count != 1 else ''}; a schedule has exactly five: "
            f"{' '.join(FIELDS)}. Fix: write it like {EXAMPLE!r} (09:00 on weekdays)."
        )


def _hour_is_wildcard(hours: list[int | str]) -> bool:
    return hours == ["*"] or len(set(hours)) == 24


def _next_wall(walk: croniter, expression: str) -> datetime:
    try:
        value = walk.get_next(datetime)
    except (CroniterBadDateError, CroniterBadCronError) as exc:  # pragma: no cover - validated
        raise ScheduleError(f"{expression!r}: no further fire time ({exc})") from None
    assert isinstance(value, datetime)
    return value


def _offset(local: datetime) -> timedelta:
    offset = local.utcoffset()
    assert offset is not None  # a ZoneInfo datetime always has one
    return offset


def _aware(instant: datetime) -> datetime:
    if instant.tzinfo is None:
        raise ValueError("schedule arithmetic needs an aware datetime (got a naive one)")
    return instant
