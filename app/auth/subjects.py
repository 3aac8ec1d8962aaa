"""Subject names (SPEC "Subjects"): who a token speaks for.

A subject name ends up as a tag value (`owner=<subject>`) and inside Casbin
policy lines, so it must not hold the characters those formats split on.
"""

from __future__ import annotations

import re
import unicodedata

from app.errors import invalid
from app.identifiers import hidden_character

MAX_SUBJECT_CHARS = 128

# No whitespace (\s is Unicode-aware on str patterns), no `=` or `,` (tag and
# policy separators). The shape only: validate_subject adds the rule of
# app.identifiers (no control or format characters) and NFC; use it, not this.
SUBJECT_RE = re.compile(rf"[^\s=,\x00-\x1f\x7f]{{1,{MAX_SUBJECT_CHARS}}}")


def validate_subject(name: str) -> str:
    """Return `name` unchanged when it is a valid subject, else raise InvalidInput
    (its `errors` name the field `subject`).

    A name not in Unicode NFC is refused, not normalized. Subjects are compared
    byte for byte: in policy lines, owner columns and owner tags. Normalizing the
    token's `sub` would quietly make an identity provider's `e`+U+0301 account and
    its U+00E9 account one subject with the rights of both; refusing keeps one
    subject, one spelling, and a client that sends NFD learns it at once.
    """
    hidden = hidden_character(name)
    if SUBJECT_RE.fullmatch(name) and hidden is None:
        if not unicodedata.is_normalized("NFC", name):
            raise invalid(
                "subject",
                "subject is not in Unicode normal form NFC: write it composed "
                "(for example U+00E9, not e followed by U+0301)",
            )
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
    elif hidden is not None:
        problem = f"contains a control or format character ({hidden})"
    else:  # pragma: no cover - the checks above cover every way SUBJECT_RE can fail
        problem = "is not a valid name"
    raise invalid(
        "subject",
        f"subject {problem}: a subject is 1 to {MAX_SUBJECT_CHARS} characters "
        "with no whitespace, '=', ',' or control or format characters",
    )
