"""Console sessions: the signed-in token kept on the server, a random id in the cookie.

The cookie holds only a random session id (32 bytes, URL-safe); the token stays here,
so it never reaches a URL, a log line or a page. The store is per process: behind
several replicas a person signs in on each (or the proxy keeps them on one). A
session ends at logout, at the token's expiry, or when the store is full and it is
the oldest.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_SESSIONS = 10_000
# At most this long even for a token valid for a year: a browser left signed in on a
# shared machine is a standing credential.
MAX_SESSION_SECONDS = 12 * 3600.0


@dataclass(frozen=True, slots=True)
class Session:
    subject: str
    token: str
    expires_at: float  # UNIX seconds: no later than the token's own `exp`
    csrf: str  # the value every form of this session must send back


def _key(session_id: str) -> str:
    # Keyed by a digest: the ids themselves are never held, compared or logged.
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    def __init__(
        self, *, clock: Callable[[], float] = time.time, capacity: int = MAX_SESSIONS
    ) -> None:
        self._clock = clock
        self._capacity = capacity
        self._lock = threading.Lock()
        self._held: OrderedDict[str, Session] = OrderedDict()

    def open(self, subject: str, token: str, token_expires_at: float) -> tuple[str, Session]:
        """A new session for a verified token: its id (the cookie's value) and itself."""
        session_id = secrets.token_urlsafe(32)
        expires_at = min(token_expires_at, self._clock() + MAX_SESSION_SECONDS)
        session = Session(subject, token, expires_at, secrets.token_urlsafe(32))
        with self._lock:
            self._held[_key(session_id)] = session
            while len(self._held) > self._capacity:
                self._held.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id or len(session_id) > 128:
            return None
        key = _key(session_id)
        with self._lock:
            session = self._held.get(key)
            if session is not None and session.expires_at <= self._clock():
                del self._held[key]
                session = None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._held.pop(_key(session_id), None)

    def seconds_left(self, session: Session) -> int:
        return max(0, int(session.expires_at - self._clock()))
