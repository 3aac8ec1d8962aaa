"""Durations as people write them: `30d`, `12h`, `1d12h` (the CLI's `--expires`, config)."""

from __future__ import annotations

import datetime as dt
import re

from app.errors import InvalidInput

# Units in descending order, each at most once: "1d12h", not "12h1d" or "1d1d". Digits
# are ASCII only (re.ASCII): \d would take Arabic-Indic or fullwidth digits, which int()
# reads as numbers no person or log reader would.
_DURATION_RE = re.compile(
    r"(?:(?P<w>\d{1,9})w)?(?:(?P<d>\d{1,9})d)?(?:(?P<h>\d{1,9})h)?"
    r"(?:(?P<m>\d{1,9})m)?(?:(?P<s>\d{1,9})s)?",
    re.ASCII,
)
_UNIT_SECONDS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
MAX_DURATION = dt.timedelta(days=3650)


def parse_duration(text: str) -> dt.timedelta:
    """Read `30d`, `12h`, `15m`, `45s`, `2w` or a combination like `1d12h` (at most 10 years)."""
    cleaned = text.strip().lower()
    match = _DURATION_RE.fullmatch(cleaned)
    shown = repr(text) if len(text) <= 40 else repr(text[:40] + "...")
    if not cleaned or match is None:
        raise InvalidInput(
            f"bad duration {shown}: use a number and a unit (w, d, h, m, s), "
            "largest unit first, like 30d, 12h or 1d12h"
        )
    seconds = sum(
        int(value) * _UNIT_SECONDS[unit] for unit, value in match.groupdict().items() if value
    )
    if seconds <= 0:
        raise InvalidInput(f"bad duration {shown}: it must be longer than zero")
    if seconds > MAX_DURATION.total_seconds():
        raise InvalidInput(f"bad duration {shown}: at most {MAX_DURATION.days} days (10 years)")
    return dt.timedelta(seconds=seconds)
