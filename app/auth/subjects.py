"""Subject names (SPEC "Subjects"): who a token speaks for.

A subject name ends up as a tag value (`owner=<subject>`) and inside Casbin
policy lines, so it must not hold the characters those formats split on.
"""

from __future__ import annotations

import re

from app.errors import InvalidInput

MAX_SUBJECT_CHARS = 128

# No whitespace (\s is Unicode-aware on str patterns), no `=` or `,` (tag and
# policy separators), and no control characters: a name that prints as
# something else would be a way to impersonate a subject in logs and listings.
SUBJECT_RE = re.compile(rf"[^\s=,\x00-\x1f\x7f]{{1,{MAX_SUBJECT_CHARS}}}")

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def validate_subject(name: str) -> str:
    """Return `name` unchanged when it is a valid subject, else raise InvalidInput."""
    if SUBJECT_RE.fullmatch(name):
        return name
    if not name:
        problem = "is empty"
    elif len(name) > MAX_SUBJECT_CHARS:
        problem = f"is longer than {MAX_SUBJECT_CHARS} characters"
    elif any(ch.isspace() for ch in name):
        problem = "contains whitespace"
    elif "=" in name:
        problem = "contains '='"
    elif "," in name:
        problem = "contains ','"
    elif _CONTROL_RE.search(name):
        problem = "contains a control character"
    else:  # pragma: no cover - the checks above cover every way SUBJECT_RE can fail
        problem = "is not a valid name"
    raise InvalidInput(
        f"subject {problem}: a subject is 1 to {MAX_SUBJECT_CHARS} characters "
        "with no whitespace, '=' or ','"
    )
