"""Plain schedule phrases people write in chat ("every Monday at 9", "every weekday at 17:30")
read as five-field cron expressions; a cron expression passes through unchanged.

What it reads: `[every|each] <days> at <time>`, where days are `day`, `weekday`, `weekend`, or day
names (full or three letters, plural too) joined by commas, `and` or `&`; the time is `H`, `H:MM`
or either with `am`/`pm` (`noon`, `midnight` too). Also `daily at <time>` and `hourly` /
`every hour` (at minute 0). Anything else is a `ScheduleError` that shows what it reads.
"""

from __future__ import annotations

import re

from bot.errors import ScheduleError

MAX_PHRASE_CHARS = 200
EXAMPLES = "'every weekday at 9', 'every Monday at 17:30', 'daily at 8am', or '0 9 * * 1-5'"

_DAYS = {
    "sun": 0,
    "mon": 1,
    "tue": 2,
    "tues": 2,
    "wed": 3,
    "thu": 4,
    "thur": 4,
    "thurs": 4,
    "fri": 5,
    "sat": 6,
}
_FULL = {
    "sunday": 0,
    "monday": 1,
    "tuesday": 2,
    "wednesday": 3,
    "thursday": 4,
    "friday": 5,
    "saturday": 6,
}
_GROUPS = {"day": "*", "days": "*", "weekday": "1-5", "weekdays": "1-5", "weekend": "0,6"}
_GROUPS["weekends"] = "0,6"
_PHRASE = re.compile(r"^(?:(?:every|each)\s+)?(?P<days>.+?)\s+at\s+(?P<time>.+)$")
_TIME = re.compile(r"^(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<half>am|pm|a\.m\.|p\.m\.)?$")
_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z?LW#]+$")


def to_cron(text: str) -> str:
    """The five-field cron expression `text` means; raises ScheduleError when it means none."""
    phrase = " ".join(text.strip().lower().split())
    if not phrase or len(phrase) > MAX_PHRASE_CHARS:
        raise _unreadable(text)
    fields = phrase.split(" ")
    if len(fields) == 5 and all(_CRON_FIELD.match(field) for field in fields):
        return " ".join(text.split())  # a cron expression: Schedule.parse checks it
    if phrase in ("hourly", "every hour", "each hour"):
        return "0 * * * *"
    if phrase.startswith("daily at "):
        phrase = "every day at " + phrase.removeprefix("daily at ")
    found = _PHRASE.match(phrase)
    if found is None:
        raise _unreadable(text)
    hour, minute = _time(found["time"], text)
    return f"{minute} {hour} * * {_days(found['days'], text)}"


def _time(text: str, original: str) -> tuple[int, int]:
    if text == "noon":
        return 12, 0
    if text == "midnight":
        return 0, 0
    found = _TIME.match(text)
    if found is None:
        raise _unreadable(original)
    hour, minute = int(found["hour"]), int(found["minute"] or 0)
    half = (found["half"] or "").replace(".", "")
    if half:
        if not 1 <= hour <= 12:
            raise _unreadable(original)
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise _unreadable(original)
    return hour, minute


def _days(text: str, original: str) -> str:
    if text in _GROUPS:
        return _GROUPS[text]
    names = [name for name in re.split(r"\s*(?:,|\band\b|&)\s*", text) if name]
    days: set[int] = set()
    for name in names:
        day = _day(name.strip())
        if day is None:
            raise _unreadable(original)
        days.add(day)
    if not days:
        raise _unreadable(original)
    return ",".join(str(day) for day in sorted(days))


def _day(name: str) -> int | None:
    single = name[:-1] if name.endswith("s") and name[:-1] in _FULL else name
    return _FULL.get(single, _DAYS.get(single))


def _unreadable(text: str) -> ScheduleError:
    shown = text if len(text) <= 80 else text[:79] + "…"
    return ScheduleError(
        f"{shown!r} is not a schedule this host reads. Fix: write it like {EXAMPLES}."
    )
