"""Subject names and token lifetimes as people type them."""

from __future__ import annotations

import datetime as dt

import pytest

from app.auth.subjects import SUBJECT_RE, validate_subject
from app.auth.tokens import parse_duration
from app.errors import InvalidInput


@pytest.mark.parametrize(
    "name",
    ["alice", "default", "a", "x" * 128, "user@example.com", "svc:backup/nightly", "josé", "Alice"],
)
def test_valid_subjects(name):
    assert validate_subject(name) == name
    assert SUBJECT_RE.fullmatch(name)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("x" * 129, "longer than 128"),
        ("a b", "whitespace"),
        (" alice", "whitespace"),
        ("alice\t", "whitespace"),
        ("a\nb", "whitespace"),
        ("a\u00a0b", "whitespace"),  # no-break space
        ("a=b", "'='"),
        ("a,b", "','"),
        ("owner=alice,x", "'='"),
        ("a\x00b", "control"),
        ("a\x7fb", "control"),
    ],
)
def test_invalid_subjects(name, problem):
    with pytest.raises(InvalidInput, match=problem) as caught:
        validate_subject(name)
    assert caught.value.status == 422
    assert not SUBJECT_RE.fullmatch(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", dt.timedelta(days=30)),
        ("12h", dt.timedelta(hours=12)),
        ("15m", dt.timedelta(minutes=15)),
        ("45s", dt.timedelta(seconds=45)),
        ("2w", dt.timedelta(weeks=2)),
        ("1d12h", dt.timedelta(days=1, hours=12)),
        ("1w2d3h4m5s", dt.timedelta(weeks=1, days=2, hours=3, minutes=4, seconds=5)),
        ("90m", dt.timedelta(minutes=90)),
        (" 7D ", dt.timedelta(days=7)),
        ("0d1h", dt.timedelta(hours=1)),
        ("3650d", dt.timedelta(days=3650)),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "unit"),
        ("   ", "unit"),
        ("30", "unit"),
        ("d", "unit"),
        ("30x", "unit"),
        ("1y", "unit"),
        ("-5m", "unit"),
        ("1.5h", "unit"),
        ("12h1d", "largest unit first"),
        ("1d1d", "unit"),
        ("1d 12h", "unit"),
        ("0s", "longer than zero"),
        ("0d0h", "longer than zero"),
        ("3651d", "at most 3650 days"),
        ("522w", "at most"),
        ("999999999w", "at most"),
        ("9" * 5000 + "s", "unit"),
        # Digits of other scripts: int() reads them, a person or a log reader may not.
        ("\u0663\u0660d", "unit"),  # Arabic-Indic 30
        ("\uff13\uff10d", "unit"),  # fullwidth 30
        ("1\u0968h", "unit"),  # Devanagari 2
    ],
)
def test_parse_duration_refusals(text, problem):
    with pytest.raises(InvalidInput, match=problem) as caught:
        parse_duration(text)
    assert len(caught.value.detail) < 200
