"""Plain schedule phrases read as cron expressions (SPEC §17), and hostile text refused cleanly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import ScheduleError
from channels.cron.phrases import to_cron
from channels.cron.schedule import Schedule


@pytest.mark.parametrize(
    ("phrase", "expression"),
    [
        ("every weekday at 9", "0 9 * * 1-5"),
        ("Every Monday at 9", "0 9 * * 1"),
        ("every monday at 17:30", "30 17 * * 1"),
        ("each Mon, Wed and Fri at 8am", "0 8 * * 1,3,5"),
        ("every day at 12pm", "0 12 * * *"),
        ("daily at 12am", "0 0 * * *"),
        ("every weekend at noon", "0 12 * * 0,6"),
        ("every sunday at midnight", "0 0 * * 0"),
        ("every Tuesdays & Thursdays at 6:05 p.m.", "5 18 * * 2,4"),
        ("hourly", "0 * * * *"),
        ("every hour", "0 * * * *"),
        ("0 9 * * 1-5", "0 9 * * 1-5"),
        ("  30   6 * * *  ", "30 6 * * *"),
    ],
)
def test_plain_phrases_become_cron_expressions(phrase: str, expression: str) -> None:
    assert to_cron(phrase) == expression
    Schedule.parse(to_cron(phrase), "Europe/Berlin")  # and they are valid schedules


@pytest.mark.parametrize(
    "phrase",
    [
        "",
        "tomorrow",
        "every blursday at 9",
        "every day at 25",
        "every day at 9:75",
        "every day at 13pm",
        "every day at 0am",
        "every monday",
        "at 9",
        "x" * 500,
    ],
)
def test_what_it_cannot_read_is_a_clear_error(phrase: str) -> None:
    with pytest.raises(ScheduleError, match="Fix: write it like"):
        to_cron(phrase)


def assert_readable_or_refused(text: str) -> None:
    """A valid schedule, or a ScheduleError that says how to fix it; nothing else escapes."""
    error = ""
    try:
        Schedule.parse(to_cron(text), "UTC")
    except ScheduleError as exc:
        error = str(exc)
    assert error == "" or "Fix:" in error


@given(st.text(max_size=120))
def test_any_text_is_a_schedule_or_a_schedule_error(text: str) -> None:
    assert_readable_or_refused(text)


words = st.sampled_from(
    [
        "every",
        "each",
        "day",
        "weekday",
        "monday",
        "fri",
        "and",
        ",",
        "at",
        "9",
        "9:30",
        "pm",
        "am",
        "noon",
        "*",
        "1-5",
        "0",
        "hourly",
        "sat",
        "&",
    ]
)


@given(st.lists(words, max_size=8).map(" ".join))
def test_near_misses_are_a_schedule_or_a_schedule_error(text: str) -> None:
    assert_readable_or_refused(text)
