"""Authentication: bearer-token verification, the local signing key, subject names.

Nothing here knows about HTTP; the API layer turns Unauthorized into a 401.

The names below are imported on first use: the ACL reads subject names
(app.auth.subjects) in every command, and importing the package must not pull in
PyJWT and cryptography (~70 ms) for commands that check no token
(bench/cli_startup.py).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "SECRET_ENV": "keys",
    "ensure_secret": "keys",
    "key_source": "keys",
    "load_public_key": "keys",
    "SUBJECT_RE": "subjects",
    "validate_subject": "subjects",
    "UNAUTHORIZED_MESSAGE": "tokens",
    "TokenVerifier": "tokens",
    "issue_token": "tokens",
    "parse_duration": "tokens",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
