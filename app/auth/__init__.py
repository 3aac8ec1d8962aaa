"""Authentication: bearer-token verification, the local signing key, subject names.

Nothing here knows about HTTP; the API layer turns Unauthorized into a 401.
"""

from app.auth.keys import SECRET_ENV, ensure_secret, key_source, load_public_key
from app.auth.subjects import SUBJECT_RE, validate_subject
from app.auth.tokens import (
    UNAUTHORIZED_MESSAGE,
    TokenVerifier,
    issue_token,
    parse_duration,
)

__all__ = [
    "SECRET_ENV",
    "SUBJECT_RE",
    "UNAUTHORIZED_MESSAGE",
    "TokenVerifier",
    "ensure_secret",
    "issue_token",
    "key_source",
    "load_public_key",
    "parse_duration",
    "validate_subject",
]
