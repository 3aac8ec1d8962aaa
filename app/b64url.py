"""Strict base64url without padding (RFC 7515 section 2, RFC 4648 section 5).

One string, one spelling: padding, characters outside the alphabet, a length no
encoding gives, and non-zero bits after the last byte are all refused. Python's
`urlsafe_b64decode` skips characters it does not know and ignores trailing bits,
so one value could be sent in many spellings; signed values (JWTs, cursors) must
not have two.
"""

from __future__ import annotations

import base64
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(text: str) -> bytes:
    """Decode `text`, or raise ValueError when it is not the one spelling of its bytes."""
    if not _ALPHABET.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not base64url without padding")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if encode(raw) != text:
        raise ValueError("base64url with stray bits after the last byte")
    return raw
