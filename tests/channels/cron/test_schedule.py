"""Schedules: wall-clock matching in a timezone, daylight-saving edges, and clear refusals."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import ScheduleError
from channels.cron.schedule import Schedule

BERLIN = ZoneInfo("Europe/Berlin")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


@functools.cache
def _fields(expression: str) -> tuple[set[int | str], set[int | str]]:
    minutes, hours, days, months, weekdays = croniter(expression).expanded
    assert days == months == weekdays == ["*"], expression  # the tests below build `M H * * *`
    return set(minutes), set(hours)


def cron_match(expression: str, wall: datetime) -> bool:
    """`croniter.match(expression, wall)` for a naive wall time and the `M H * * *` expressions
    the tests below build, from croniter's own reading of the fields, made once: croniter.match
    parses the expression and steps its calendar on every call, which was most of their time."""
    minutes, hours = _fields(expression)
    return wall.minute in minutes and ("*" in hours or wall.hour in hours)


def fires(expression: str, after: datetime, count: int, zone: str = "Europe/Berlin") -> list[str]:
    schedule = Schedule.parse(expression, zone)
    return [f.isoformat() for f in islice(schedule.fires_after(after), count)]


def test_daily_job_keeps_local_time_across_spring_forward() -> None:
    # Berlin goes from +01:00 to +02:00 on 2024-03-31: 09:00 local moves from 08:00Z to 07:00Z.
    assert fires("0 9 * * *", utc(2024, 3, 29, 12), 3) == [
        "2024-03-30T08:00:00+00:00",
        "2024-03-31T07:00:00+00:00",
        "2024-04-01T07:00:00+00:00",
    ]


def test_daily_job_keeps_local_time_across_fall_back() -> None:
    assert fires("0 9 * * *", utc(2024, 10, 26, 12), 2) == [
        "2024-10-27T08:00:00+00:00",
        "2024-10-28T08:00:00+00:00",
    ]


def test_skipped_wall_time_fires_once_shifted_by_the_jump() -> None:
    # 02:30 does not exist on 2024-03-31 in Berlin; it fires once, at 03:30 CEST (01:30Z).
    assert fires("30 2 * * *", utc(2024, 3, 30, 3), 3) == [
        "2024-03-31T01:30:00+00:00",
        "2024-04-01T00:30:00+00:00",
        "2024-04-02T00:30:00+00:00",
    ]


def test_repeated_wall_time_fires_once_at_its_first_occurrence() -> None:
    # 02:30 happens twice on 2024-10-27 (CEST, then CET); a fixed-hour job fires on the first.
    assert fires("30 2 * * *", utc(2024, 10, 26, 3), 2) == [
        "2024-10-27T00:30:00+00:00",
        "2024-10-28T01:30:00+00:00",
    ]


def test_hourly_job_keeps_its_pace_through_the_repeated_hour() -> None:
    assert fires("0 * * * *", utc(2024, 10, 26, 23, 30), 4) == [
        "2024-10-27T00:00:00+00:00",  # 02:00 CEST
        "2024-10-27T01:00:00+00:00",  # 02:00 CET, the repeated hour
        "2024-10-27T02:00:00+00:00",  # 03:00 CET
        "2024-10-27T03:00:00+00:00",
    ]


def test_frequent_job_across_spring_forward_neither_bursts_nor_repeats() -> None:
    assert fires("*/30 * * * *", utc(2024, 3, 31, 0, 0), 4) == [
        "2024-03-31T00:30:00+00:00",  # 01:30 CET
        "2024-03-31T01:00:00+00:00",  # the jump: 02:00 and 02:30 are folded into 03:00/03:30
        "2024-03-31T01:30:00+00:00",
        "2024-03-31T02:00:00+00:00",
    ]


def test_next_after_from_inside_the_repeated_hour() -> None:
    schedule = Schedule.parse("15 * * * *", "Europe/Berlin")
    second_0220 = datetime(2024, 10, 27, 2, 20, tzinfo=BERLIN, fold=1)  # 01:20Z
    assert schedule.next_after(second_0220) == utc(2024, 10, 27, 2, 15)  # 03:15 CET


def test_weekday_job_skips_the_weekend() -> None:
    # 2024-03-29 is a Friday.
    assert fires("0 9 * * 1-5", utc(2024, 3, 29, 9), 1) == ["2024-04-01T07:00:00+00:00"]


def test_latest_in_returns_only_the_last_slot_of_a_window() -> None:
    schedule = Schedule.parse("*/5 * * * *", "UTC")
    assert schedule.latest_in(utc(2024, 1, 1, 10, 0), utc(2024, 1, 1, 10, 17)) == utc(
        2024, 1, 1, 10, 15
    )
    assert schedule.latest_in(utc(2024, 1, 1, 10, 0), utc(2024, 1, 1, 10, 4)) is None
    # The end is included, the start is not.
    assert schedule.latest_in(utc(2024, 1, 1, 10, 0), utc(2024, 1, 1, 10, 5)) == utc(
        2024, 1, 1, 10, 5
    )


def test_local_shows_the_fire_time_on_the_jobs_own_clock() -> None:
    schedule = Schedule.parse("0 9 * * *", "Europe/Berlin")
    local = schedule.local(schedule.next_after(utc(2024, 7, 1)))
    assert local.isoformat() == "2024-07-01T09:00:00+02:00"


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("61 * * * *", "not a valid cron expression"),
        ("0 9 * *", "has 4 fields"),
        ("0 0 9 * * *", "has 6 fields"),
        ("@daily", "'0 0 * * *'"),
        ("0 0 30 2 *", "never fires"),
        ("not a schedule", "has 3 fields"),
    ],
)
def test_bad_expressions_are_refused_with_the_fix(expression: str, says: str) -> None:
    with pytest.raises(ScheduleError, match="Fix:") as caught:
        Schedule.parse(expression, "UTC")
    assert says in str(caught.value)


def test_unknown_timezone_is_refused() -> None:
    with pytest.raises(ScheduleError, match="IANA"):
        Schedule.parse("0 9 * * *", "Mars/Olympus")


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        Schedule.parse("0 9 * * *", "UTC").next_after(datetime(2024, 1, 1))


# --- properties -----------------------------------------------------------------------------

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
minutes = st.lists(st.integers(0, 59), min_size=1, max_size=4, unique=True)
hours = st.one_of(st.just("*"), st.lists(st.integers(0, 23), min_size=1, max_size=4, unique=True))
# Clock changes of 2024 in those zones (Berlin, New York, Lord Howe's half-hour shifts).
TRANSITIONS = [
    utc(2024, 3, 31, 1),
    utc(2024, 10, 27, 1),
    utc(2024, 3, 10, 7),
    utc(2024, 11, 3, 6),
    utc(2024, 4, 6, 15),
    utc(2024, 10, 5, 15, 30),
]
anywhere = st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1), timezones=st.just(UTC))
near_a_change = st.builds(
    lambda change, delta: change + delta,
    st.sampled_from(TRANSITIONS),
    st.timedeltas(timedelta(days=-2), timedelta(days=1)),
)
instants = st.one_of(anywhere, near_a_change)


def expression_of(minute: list[int], hour: str | list[int]) -> str:
    hour_field = hour if isinstance(hour, str) else ",".join(map(str, sorted(hour)))
    return f"{','.join(map(str, sorted(minute)))} {hour_field} * * *"


@settings(max_examples=150, deadline=None)
@given(minute=minutes, hour=hours, zone=st.sampled_from(ZONES), after=instants)
def test_fires_are_strictly_increasing_and_chain(
    minute: list[int], hour: str | list[int], zone: str, after: datetime
) -> None:
    schedule = Schedule.parse(expression_of(minute, hour), zone)
    seen = list(islice(schedule.fires_after(after), 30))
    assert seen[0] > after
    assert all(a < b for a, b in pairwise(seen))
    for earlier, later in pairwise(seen):
        assert schedule.next_after(earlier) == later
    # Between two fires no more than a day passes for a daily-or-more-often schedule.
    assert all(b - a <= timedelta(days=1, hours=1) for a, b in pairwise(seen))


@settings(max_examples=150, deadline=None)
@given(minute=minutes, hour=hours, zone=st.sampled_from(ZONES), after=instants)
def test_every_fire_matches_the_wall_clock_or_is_a_skipped_time_moved_forward(
    minute: list[int], hour: str | list[int], zone: str, after: datetime
) -> None:
    expression = expression_of(minute, hour)
    schedule = Schedule.parse(expression, zone)
    tz = ZoneInfo(zone)
    for fire in islice(schedule.fires_after(after), 30):
        wall = fire.astimezone(tz).replace(tzinfo=None)
        if cron_match(expression, wall):
            continue
        # Not a matching wall time: it must be a skipped one, read with the pre-jump offset.
        before = fire - timedelta(hours=3)
        jump = fire.astimezone(tz).utcoffset() - before.astimezone(tz).utcoffset()  # type: ignore[operator]
        assert jump > timedelta(0)
        assert cron_match(expression, wall - jump)


@settings(max_examples=100, deadline=None)
@given(minute=minutes, hour=hours, zone=st.sampled_from(["UTC", "Asia/Kolkata"]), after=instants)
def test_without_daylight_saving_fires_are_exactly_crons_wall_times(
    minute: list[int], hour: str | list[int], zone: str, after: datetime
) -> None:
    expression = expression_of(minute, hour)
    tz = ZoneInfo(zone)
    walk = croniter(expression, after.astimezone(tz).replace(tzinfo=None))
    expected = [walk.get_next(datetime).replace(tzinfo=tz) for _ in range(10)]
    got = list(islice(Schedule.parse(expression, zone).fires_after(after), 10))
    assert got == expected


def test_next_after_from_the_first_pass_of_the_repeated_hour_finds_the_second() -> None:
    schedule = Schedule.parse("15 * * * *", "Europe/Berlin")
    first_0250 = datetime(2024, 10, 27, 2, 50, tzinfo=BERLIN, fold=0)  # 00:50Z, CEST
    assert schedule.next_after(first_0250) == utc(2024, 10, 27, 1, 15)  # 02:15 again, CET


def expected_fires(expression: str, every_hour: bool, zone: str, start: datetime, end: datetime):
    """Brute force, minute by minute: which instants in (start, end] should fire."""
    tz = ZoneInfo(zone)
    out = []
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t <= end:
        local = t.astimezone(tz)
        wall = local.replace(tzinfo=None, fold=0)
        fire = cron_match(expression, wall) and (local.fold == 0 or every_hour)
        jump = local.utcoffset() - (t - timedelta(hours=3)).astimezone(tz).utcoffset()
        if not fire and jump > timedelta(0):
            skipped = wall - jump  # a wall time the jump skipped, read with the old offset
            read = skipped.replace(tzinfo=tz).astimezone(UTC)
            missing = read.astimezone(tz).replace(tzinfo=None) != skipped
            fire = missing and cron_match(expression, skipped)
            fire = fire and read == t
        if fire:
            out.append(t)
        t += timedelta(minutes=1)
    return out


ZONE_CHANGES = [
    ("Europe/Berlin", TRANSITIONS[0]),
    ("Europe/Berlin", TRANSITIONS[1]),
    ("America/New_York", TRANSITIONS[2]),
    ("America/New_York", TRANSITIONS[3]),
    ("Australia/Lord_Howe", TRANSITIONS[4]),
    ("Australia/Lord_Howe", TRANSITIONS[5]),
]


@settings(max_examples=50, deadline=None)
@given(
    minute=minutes,
    hour=hours,
    zone_change=st.sampled_from(ZONE_CHANGES),
    lead=st.timedeltas(timedelta(hours=-4), timedelta(hours=1)),
)
def test_fires_near_a_clock_change_are_exactly_the_brute_force_ones(
    minute: list[int],
    hour: str | list[int],
    zone_change: tuple[str, datetime],
    lead: timedelta,
) -> None:
    zone, change = zone_change
    expression = expression_of(minute, hour)
    schedule = Schedule.parse(expression, zone)
    start = change + lead
    end = start + timedelta(hours=6)
    got = []
    for fire in schedule.fires_after(start):
        if fire > end:
            break
        got.append(fire)
    assert got == expected_fires(expression, hour == "*", zone, start, end)
    # Starting again from any fire finds the same continuation.
    for earlier, later in pairwise(got):
        assert schedule.next_after(earlier) == later


@pytest.mark.parametrize(
    "expression", ["R 9 * * *", "0 R * * *", "R(0-10) 9 * * 1-5", "5,r 9 * * *"]
)
def test_a_random_field_is_refused_so_next_times_stay_put(expression: str) -> None:
    with pytest.raises(ScheduleError, match=r"R \(a random value\).*Fix:"):
        Schedule.parse(expression, "Europe/Berlin")


def test_month_and_day_names_with_r_are_not_random() -> None:
    schedule = Schedule.parse("0 9 * MAR FRI", "Europe/Berlin")
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert schedule.next_after(after) == schedule.next_after(after)
