"""The time window a question names: "yesterday", "last week", "in May", "3 days ago".

A question that names a time ("What did Tom adopt last spring?") is about facts
written then. `window(q, now)` finds the common English forms and returns the span
they mean, relative to `now` (the request's moment), and the words that said it, so
the keyword half does not look for "last" and "week" in the facts themselves.

Our own small parser rather than dateparser: dateparser's `search_dates` reads any
number-like word as a date ("3 cats" became a day of the month) and costs ~10 ms a
question on this machine, where these forms cost ~20 us. A window only BOOSTS facts
created inside it (app.services.search); it never removes one.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DAY = 86_400.0
MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name} | {
    name.lower(): number for number, name in enumerate(calendar.month_abbr) if name
}
MONTHS.pop("may", None)  # "may" is mostly the verb: only "in May" / "May 3" forms below
WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a few": 3, "a couple of": 2, "couple of": 2, "few": 3, "several": 4,
}  # fmt: skip
UNITS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
SEASONS = {
    "spring": (3, 5),
    "summer": (6, 8),
    "autumn": (9, 11),
    "fall": (9, 11),
    "winter": (12, 2),
}

_MONTH_NAMES = "|".join(sorted([*MONTHS, "may"], key=len, reverse=True))
_NUMBER_WORDS = "|".join(sorted(NUMBERS, key=len, reverse=True))
_WEEKDAYS = "|".join(WEEKDAYS)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(\d{4}))?"
_PATTERNS = [
    ("day_before_yesterday", r"\bthe day before yesterday\b"),
    ("yesterday", r"\byesterday\b"),
    ("today", r"\b(?:today|this morning|this afternoon|this evening|tonight)\b"),
    ("ago", rf"\b(\d+|{_NUMBER_WORDS})\s+(day|week|month|year)s?\s+ago\b"),
    ("last_unit", r"\b(?:last|past|previous)\s+(weekend|week|month|year)\b"),
    ("this_unit", r"\bthis\s+(weekend|week|month|year)\b"),
    ("last_n", rf"\b(?:last|past|previous)\s+(\d+|{_NUMBER_WORDS})\s+(day|week|month|year)s\b"),
    ("season", r"\b(last|this|in the|in)\s+(spring|summer|autumn|fall|winter)\b"),
    ("weekday", rf"\b(last|on|this past)\s+({_WEEKDAYS})\b"),
    ("month_day", rf"\b(?:on\s+)?({_MONTH_NAMES})\.?\s+{_DAY}{_YEAR}\b"),
    ("day_month", rf"\b{_DAY}\s+(?:of\s+)?({_MONTH_NAMES}){_YEAR}\b"),
    ("month", rf"\b(in|during|last|this|since)\s+({_MONTH_NAMES})(?:\s+(\d{{4}}))?\b"),
    ("year", r"\b(?:in|during)\s+((?:19|20)\d{2})\b"),
]  # fmt: skip
_COMPILED = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _PATTERNS]


@dataclass(frozen=True)
class Window:
    """[start, end) in epoch seconds, and the span of the question that named it."""

    start: float
    end: float
    words: str


# What a date can hold: a span the question names is clamped to these, so "3000000 days
# ago" or "on December 31st 9999" name a span at the edge of time, never an error.
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def _shift(moment: datetime, days: float) -> datetime:
    """`moment` moved by `days`, clamped to what a date can hold."""
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return LATEST if days > 0 else EARLIEST


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word.lower()]


def _day_start(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    year = min(max(year, EARLIEST.year), LATEST.year)
    start = datetime(year, month, 1, tzinfo=UTC)
    if (year, month) == (LATEST.year, 12):
        return start, LATEST
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _past_month(now: datetime, month: int, year: str | None) -> tuple[datetime, datetime]:
    """A month named without a year is its latest occurrence not after now."""
    if year:
        return _month_span(int(year), month)
    y = now.year if month <= now.month else now.year - 1
    return _month_span(y, month)


def _span(name: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    today = _day_start(now)
    if name == "day_before_yesterday":
        return today - timedelta(days=2), today - timedelta(days=1)
    if name == "yesterday":
        return today - timedelta(days=1), today
    if name == "today":
        return today, today + timedelta(days=1)
    if name == "ago":
        days = _number(m.group(1)) * UNITS[m.group(2).lower()]
        center = _shift(now, -days)
        # "two weeks ago" is vague by about half a unit either way.
        slack = max(1.0, UNITS[m.group(2).lower()] / 2)
        return _shift(center, -slack), _shift(center, slack)
    if name in ("last_unit", "this_unit"):
        unit = m.group(1).lower()
        last = name == "last_unit"
        if unit == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7)
            if last and saturday + timedelta(days=2) > now:
                saturday -= timedelta(days=7)
            return saturday, saturday + timedelta(days=2)
        if unit == "week":
            monday = today - timedelta(days=today.weekday())
            return (monday - timedelta(days=7), monday) if last else (monday, now)
        if unit == "month":
            start, _ = _month_span(now.year, now.month)
            if not last:
                return start, now
            previous = start - timedelta(days=1)
            return _month_span(previous.year, previous.month)
        start = datetime(now.year - last, 1, 1, tzinfo=UTC)
        return start, (datetime(now.year, 1, 1, tzinfo=UTC) if last else now)
    if name == "last_n":
        days = _number(m.group(1)) * UNITS[m.group(2).lower()]
        return _shift(now, -days), now
    if name == "season":
        first, last_month = SEASONS[m.group(2).lower()]
        year = now.year
        start = datetime(year, first, 1, tzinfo=UTC)
        if start > now or (m.group(1).lower() == "last" and start + timedelta(days=91) > now):
            year -= 1
            start = datetime(year, first, 1, tzinfo=UTC)
        end_year = year + (last_month < first)
        return start, _month_span(end_year, last_month)[1]
    if name == "weekday":
        target = WEEKDAYS[m.group(2).lower()]
        back = (today.weekday() - target) % 7 or 7
        day = today - timedelta(days=back)
        return day, day + timedelta(days=1)
    if name in ("month_day", "day_month"):
        month_word, day_word = (
            (m.group(1), m.group(2)) if name == "month_day" else (m.group(2), m.group(1))
        )
        month = MONTHS.get(month_word.lower(), 5)  # only "may" is missing from MONTHS
        year = int(m.group(3)) if m.group(3) else now.year
        try:
            day = datetime(year, month, int(day_word), tzinfo=UTC)
            if not m.group(3) and day > now:
                day = day.replace(year=year - 1)
        except ValueError:
            return None  # no such day (February 30th, the year 0)
        return day, _shift(day, 1)
    if name == "month":
        month = MONTHS.get(m.group(2).lower(), 5)
        if m.group(1).lower() == "since":
            start, _ = _past_month(now, month, m.group(3))
            return start, now
        return _past_month(now, month, m.group(3))
    if name == "year":
        year = int(m.group(1))
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    return None


def window(q: str, now: float) -> Window | None:
    """The first time span `q` names, relative to `now` (epoch seconds), or None."""
    moment = datetime.fromtimestamp(now, tz=UTC)
    for name, pattern in _COMPILED:
        match = pattern.search(q)
        if match is None:
            continue
        span = _span(name, match, moment)
        if span is not None and span[0] < span[1]:
            return Window(span[0].timestamp(), span[1].timestamp(), match.group(0))
    return None
