"""Folding and checking of user input: paths, tags and content (SPEC: Paths, facts ...)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

from app.errors import invalid
from app.identifiers import hidden_character
from app.rules import (
    MAX_LIMIT,
    MAX_PATH_TAGS,
    MAX_SEGMENT_CHARS,
    MAX_SEGMENTS,
    OWNER_KEY,
    SEGMENT_RE,
    TAG_KEY,
    TAG_VALUE,
)


def fold_path(raw: str, field: str = "path") -> str:
    """Fold a path to lowercase and check it; '/Projects/Embornal/' -> '/projects/embornal'."""
    # Checked before folding: strip() would quietly eat a trailing newline or tab.
    hidden = hidden_character(raw)
    if hidden:
        raise invalid(field, f"path holds a control or format character ({hidden})")
    path = raw.strip().lower()
    if not path.startswith("/"):
        raise invalid(field, f"path {raw!r} must start with '/'")
    if path != "/" and path.endswith("/"):
        path = path[:-1]  # a trailing '/' is tolerated
    if path == "/":
        return "/"
    segments = path[1:].split("/")
    if len(segments) > MAX_SEGMENTS:
        raise invalid(field, f"path {raw!r} has {len(segments)} segments; at most {MAX_SEGMENTS}")
    for segment in segments:
        if not segment:
            raise invalid(field, f"path {raw!r} has an empty segment")
        if len(segment) > MAX_SEGMENT_CHARS:
            raise invalid(
                field, f"segment {segment!r} is longer than {MAX_SEGMENT_CHARS} characters"
            )
        if not SEGMENT_RE.match(segment):
            raise invalid(
                field,
                f"segment {segment!r} must start with a letter or digit and hold only "
                "letters, digits, '.', '_' and '-'",
            )
    return path


def _is_unicode(text: str) -> bool:
    """False for a string with a lone surrogate: JSON can spell one (`"\\ud800"`), and the
    JSON parser lets it through, but UTF-8 (and so SQLite) cannot hold it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_tag(key: str, value: str, field: str = "tags") -> tuple[str, str]:
    for part, text in (("key", key), ("value", value)):
        hidden = hidden_character(text) if isinstance(text, str) else None
        if hidden:
            raise invalid(field, f"tag {part} holds a control or format character ({hidden})")
    key = key.strip().lower()
    if not TAG_KEY.match(key):
        raise invalid(
            field,
            f"tag key {key!r} must be 1-64 characters: a letter or digit, then letters, "
            "digits, '.', '_' or '-'",
        )
    if not isinstance(value, str) or not TAG_VALUE.match(value) or not _is_unicode(value):
        raise invalid(
            field, f"tag {key!r}: value must be 1-256 characters with no space, '=' or ','"
        )
    return key, value


def _checked_tags(
    tags: Mapping[str, str], limit: int, field: str, *, carrier: str, owner_refusal: str
) -> dict[str, str]:
    """Tags checked one by one, at most `limit`, none `owner` and no key twice once
    folded to lowercase ({"Team": "a", "team": "b"} would keep one value unsaid)."""
    if len(tags) > limit:
        raise invalid(field, f"{carrier} carries at most {limit} tags, not {len(tags)}")
    checked: dict[str, str] = {}
    for raw_key, raw_value in tags.items():
        key, value = check_tag(raw_key, raw_value, field)
        if key == OWNER_KEY:
            raise invalid(field, owner_refusal)
        if key in checked:
            raise invalid(field, f"tag {key!r} is given twice")
        checked[key] = value
    return checked


def check_tags(tags: Mapping[str, str] | None, limit: int, field: str = "tags") -> dict[str, str]:
    """Check a fact's own tags; the memory alone writes the owner tag."""
    return _checked_tags(
        dict(tags or {}),
        limit,
        field,
        carrier="a fact",
        owner_refusal="the owner tag is written by the memory from the token's subject",
    )


def check_path_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """Check tags set on a node: an `owner` there could never reach a fact (a fact's
    own owner tag always wins), so setting one would only mislead."""
    return _checked_tags(
        tags,
        MAX_PATH_TAGS,
        "tags",
        carrier="a node",
        owner_refusal="a path tag may not be 'owner': every fact carries its own",
    )


def parse_tag_filter(text: str, field: str = "tag") -> tuple[str, str]:
    """Parse a `key=value` filter."""
    key, sep, value = text.partition("=")
    if not sep:
        raise invalid(field, f"tag filter {text!r} must be key=value")
    return check_tag(key, value, field)


def check_content(content: str, limit: int, field: str = "content") -> str:
    if not content or not content.strip():
        raise invalid(field, "content is empty")
    if len(content) > limit:
        raise invalid(field, f"content has {len(content)} characters; at most {limit}")
    if "\x00" in content:
        raise invalid(field, "content holds a NUL character")
    if not _is_unicode(content):
        raise invalid(field, "content holds a lone surrogate, which is not Unicode text")
    return content


_QUERY_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def check_query(q: str, limit: int, field: str = "q") -> str:
    """A search's text: some words, no control character but tab and line breaks (a NUL
    or an escape would reach FTS5 and the tokenizer as nothing, and match everything)."""
    if not q or not q.strip():
        raise invalid(field, "q must hold some text to search for")
    if len(q) > limit:
        raise invalid(field, f"q is longer than {limit} characters")
    control = _QUERY_CONTROL.search(q)
    if control:
        raise invalid(field, f"q holds a control character (U+{ord(control.group()):04X})")
    if not _is_unicode(q):
        raise invalid(field, "q holds a lone surrogate, which is not Unicode text")
    return q


def check_limit(limit: int) -> int:
    """A page size: a listing's or a search's `limit`."""
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid("limit", f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    return limit


# RFC 3339 date-time: a date, a time, and an offset (Z or +hh:mm). Stricter than
# datetime.fromisoformat (which takes a date alone, a naive time, week dates...) and
# than pydantic's lax datetime (which takes a bare UNIX number).
_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
)
MAX_MOMENT_CHARS = 40


def parse_moment(text: str, field: str = "as_of") -> datetime:
    """An RFC 3339 date-time that carries its offset, as an aware datetime in UTC."""
    if not isinstance(text, str) or len(text) > MAX_MOMENT_CHARS or not _RFC3339.match(text):
        raise invalid(
            field,
            f"{field} must be an RFC 3339 date-time with a timezone, "
            "e.g. 2026-12-01T09:30:00Z or 2026-12-01T10:30:00+01:00",
        )
    normal = text.upper().replace(" ", "T").replace("Z", "+00:00")
    whole, dot, rest = normal.partition(".")
    if dot:  # fromisoformat takes at most microseconds
        digits, offset = rest[:-6], rest[-6:]
        normal = f"{whole}.{digits[:6].ljust(6, '0')}{offset}"
    try:
        moment = datetime.fromisoformat(normal)
    except ValueError:
        raise invalid(field, f"{field} {text!r} is not a date and time that exists") from None
    try:
        # 0001-01-01T00:00:00+14:00 is valid RFC 3339, but in UTC it falls before year 1
        # (and 9999-12-31T23:59:59-14:00 after 9999): no datetime holds it.
        return moment.astimezone(UTC)
    except OverflowError:
        raise invalid(
            field, f"{field} {text!r} falls outside the dates a memory can answer for"
        ) from None
