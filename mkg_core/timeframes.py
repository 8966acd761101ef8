"""The dates a prompt names, as time windows for recall.

"What did we decide on 13 October 2025?" names a day; memory made around that day is more likely
what the user means. :func:`named_windows` finds such dates (standard library only, English):

- a day: ``2025-10-13``, ``13 October 2025``, ``13th of Oct, 2025``, ``October 13, 2025``;
- a month: ``October 2025``, ``Oct 2025``;
- relative to now: ``today``, ``yesterday``, ``this week``, ``last week``.

A day's window reaches one day either side (memory is often written after midnight, and time zones
differ). A month or year alone ("in June", "in 2024") is too vague to help and is not a window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

#: At most this many windows from one prompt.
MAX_WINDOWS = 4
#: Days added on each side of a named day.
DAY_SLACK = 1

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = [
    ("day", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<monthnum>\d\d)-(?P<day>\d\d)\b")),
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("month", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)),
]
_RELATIVE = re.compile(r"\b(today|yesterday|this week|last week)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """A half-open UTC interval ``[start, end)``."""

    start: datetime
    end: datetime

    def __contains__(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def aware(value: object) -> datetime | None:
    """A moment read from the graph (a Neo4j DateTime, or a datetime) as an aware datetime; naive
    ones are taken as UTC. Anything else is None."""
    to_native = getattr(value, "to_native", None)
    if callable(to_native):
        value = to_native()
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _day_window(day: date) -> Window:
    return Window(_midnight(day - timedelta(days=DAY_SLACK)), _midnight(day + timedelta(days=1 + DAY_SLACK)))


def _month_window(year: int, month: int) -> Window:
    following = date(year + month // 12, month % 12 + 1, 1)
    return Window(_midnight(date(year, month, 1)), _midnight(following))


def _relative_window(phrase: str, today: date) -> Window:
    monday = today - timedelta(days=today.weekday())
    if phrase == "today":
        return _day_window(today)
    if phrase == "yesterday":
        return _day_window(today - timedelta(days=1))
    if phrase == "this week":
        return Window(_midnight(monday), _midnight(today + timedelta(days=1)))
    return Window(_midnight(monday - timedelta(days=7)), _midnight(monday))  # last week


def named_windows(text: str, now: datetime | None = None) -> list[Window]:
    """The time windows of the dates ``text`` names, in order of appearance, without repeats."""
    found: list[tuple[int, Window]] = []
    taken: list[tuple[int, int]] = []  # a day's text (even an impossible one) is not read as a month
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            taken.append(match.span())
            parts = match.groupdict()
            month = int(parts["monthnum"]) if parts.get("monthnum") else _MONTHS[parts["month"].lower()]
            try:
                if kind == "day":
                    window = _day_window(date(int(parts["year"]), month, int(parts["day"])))
                else:
                    window = _month_window(int(parts["year"]), month)
            except ValueError:  # 31 February, month 13
                continue
            found.append((match.start(), window))
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    for match in _RELATIVE.finditer(text):
        found.append((match.start(), _relative_window(match.group(1).lower(), today)))
    windows: list[Window] = []
    for _, window in sorted(found, key=lambda item: item[0]):
        if window not in windows:
            windows.append(window)
    return windows[:MAX_WINDOWS]
