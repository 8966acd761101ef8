"""The dates a prompt names, read as time windows for recall."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mkg_core.timeframes import MAX_WINDOWS, Window, named_windows

NOW = datetime(2026, 3, 12, 15, 30, tzinfo=UTC)  # a Thursday


def _days(window: Window) -> tuple[str, str]:
    return window.start.date().isoformat(), window.end.date().isoformat()


@pytest.mark.parametrize(
    "text",
    [
        "what did we decide on 13 October 2025?",
        "what did we decide on 13th of October, 2025",
        "what did we decide on October 13, 2025?",
        "what did we decide on Oct. 13th 2025",
        "what did we decide on 2025-10-13",
        "WHAT DID WE DECIDE ON 13 OCT 2025",
    ],
)
def test_a_named_day_is_that_day_give_or_take_one(text: str) -> None:
    assert [_days(w) for w in named_windows(text, NOW)] == [("2025-10-12", "2025-10-15")]


def test_a_named_month_is_the_whole_month() -> None:
    assert [_days(w) for w in named_windows("the outage in December 2025", NOW)] == [
        ("2025-12-01", "2026-01-01")
    ]
    assert [_days(w) for w in named_windows("sept 2025 and Feb, 2024", NOW)] == [
        ("2025-09-01", "2025-10-01"),
        ("2024-02-01", "2024-03-01"),
    ]


def test_relative_days_and_weeks_count_from_now() -> None:
    windows = named_windows("what broke yesterday, today, this week and last week?", NOW)
    assert [_days(w) for w in windows] == [
        ("2026-03-10", "2026-03-13"),  # yesterday (11 March), one day either side
        ("2026-03-11", "2026-03-14"),  # today
        ("2026-03-09", "2026-03-13"),  # Monday to today
        ("2026-03-02", "2026-03-09"),  # the Monday-to-Sunday week before
    ]


@pytest.mark.parametrize(
    "text",
    [
        "we may 2x the budget",  # "may" is a verb here
        "what happened in June?",  # a month alone is too vague
        "the 2024 roadmap",  # and so is a year
        "31 February 2025 never happened",  # no such day
        "2025-13-01 is not a date",
        "last weekend",  # not "last week"
        "version 10.13.2025 of the tool",
    ],
)
def test_vague_or_impossible_dates_are_not_windows(text: str) -> None:
    assert named_windows(text, NOW) == []


def test_each_date_counts_once_and_few_are_kept() -> None:
    text = "On 13 October 2025 and again on October 13, 2025; also " + ", ".join(
        f"{day} May 2025" for day in range(1, 5)
    )
    windows = named_windows(text, NOW)
    assert len(windows) == MAX_WINDOWS
    assert [_days(w)[0] for w in windows] == ["2025-10-12", "2025-04-30", "2025-05-01", "2025-05-02"]
    assert datetime(2025, 10, 13, 23, 59, tzinfo=UTC) in windows[0]
    assert datetime(2025, 10, 15, tzinfo=UTC) not in windows[0]  # the end is open
