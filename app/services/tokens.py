"""Tokens the memory signed: their records, their revocation, the list of revoked ids
each server keeps, and the one-time codes of console sign-in links.

A record holds the token's jti, subject, label, who issued it and its times; never
the token. Any subject sees and revokes its own tokens; an admin sees and revokes
all, and may revoke a jti this memory never issued (a token from an identity
provider), which is then kept as a record with no subject. Every revocation changes
`meta.token_revocations` in its own transaction: each server compares that value
with the one its cached list was read at (RevocationList), so a revocation made by
any process (another replica, the command line) is seen everywhere.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, or_, select, update

from app.db.tables import meta, signin_codes, tokens
from app.errors import Conflict, NotFound, Unauthorized, invalid
from app.identifiers import hidden_character
from app.rules import MAX_JTI_CHARS, MAX_LABEL_CHARS, TokenStatus
from app.services.context import Context

REVOCATIONS_KEY = "token_revocations"
# Read on every request (RevocationList.refresh): built once, so that SQLAlchemy keeps its
# cache key instead of making a statement and its key again each time.
_REVOCATIONS_VERSION = select(meta.c.value).where(meta.c.key == REVOCATIONS_KEY)
# A sign-in link's code: valid this long, and once.
SIGNIN_CODE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A token as the memory recorded it. `issued_here` false: a jti an admin revoked
    that another issuer made (subject, label and times are then unknown)."""

    jti: str
    subject: str | None
    label: str | None
    issued_by: str | None
    issued_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str | None
    status: TokenStatus
    issued_here: bool


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _row(conn: Connection, jti: str) -> Any:
    """The token's row, or None."""
    return conn.execute(select(tokens).where(tokens.c.jti == jti)).first()


def _record(row: Any, now: float) -> TokenRecord:
    status: TokenStatus = "active"
    if row.revoked_at is not None:
        status = "revoked"
    elif row.expires_at is not None and row.expires_at <= now:
        status = "expired"
    return TokenRecord(
        jti=row.jti,
        subject=row.subject,
        label=row.label,
        issued_by=row.issued_by,
        issued_at=_time(row.issued_at),
        expires_at=_time(row.expires_at),
        revoked_at=_time(row.revoked_at),
        revoked_by=row.revoked_by,
        status=status,
        issued_here=row.issued_at is not None,
    )


def check_label(label: str) -> str | None:
    """A token's label, trimmed (None when empty): a short line of text for people."""
    label = label.strip()
    if len(label) > MAX_LABEL_CHARS:
        message = f"a token's label is at most {MAX_LABEL_CHARS} characters"
        raise invalid("label", message)
    hidden = hidden_character(label)
    if hidden is not None:
        message = f"a token's label holds a control or format character ({hidden})"
        raise invalid("label", message)
    return label or None


def record_issued(
    conn: Connection,
    ctx: Context,
    *,
    jti: str,
    subject: str,
    label: str | None,
    issued_at: float,
    expires_at: float,
) -> TokenRecord:
    """Record a token the memory signs, issued by `ctx.subject`."""
    conn.execute(
        insert(tokens).values(
            jti=jti,
            subject=subject,
            label=label,
            issued_by=ctx.subject,
            issued_at=issued_at,
            expires_at=expires_at,
        )
    )
    return _record(_row(conn, jti), issued_at)


def holds_live_token(conn: Connection, subject: str, *, now: float) -> bool:
    """Whether this memory issued `subject` a token that is neither revoked nor expired
    at `now` (the wall clock's time: a token's expiry is on it)."""
    live = conn.execute(
        select(tokens.c.jti)
        .where(
            tokens.c.subject == subject,
            tokens.c.revoked_at.is_(None),
            or_(tokens.c.expires_at.is_(None), tokens.c.expires_at > now),
        )
        .limit(1)
    ).first()
    return live is not None


def list_tokens(
    conn: Connection, ctx: Context, *, now: float, include_expired: bool = False
) -> list[TokenRecord]:
    """The subject's own tokens, or every record for an admin; newest first (a revoked
    jti not issued here last). Expired ones (at `now`) only with `include_expired`."""
    query = select(tokens)
    if not ctx.access.is_admin:
        query = query.where(tokens.c.subject == ctx.subject)
    if not include_expired:
        query = query.where(or_(tokens.c.expires_at.is_(None), tokens.c.expires_at > now))
    query = query.order_by(tokens.c.issued_at.desc().nulls_last(), tokens.c.jti)
    return [_record(row, now) for row in conn.execute(query)]


def find_token(conn: Connection, ctx: Context, jti: str, *, now: float) -> TokenRecord | None:
    """The record of `jti` if the subject may see it (its own, or any for an admin);
    None when there is none, or none it may see: one answer for both."""
    row = _row(conn, jti)
    if row is None or not (ctx.access.is_admin or row.subject == ctx.subject):
        return None
    return _record(row, now)


def revocable(conn: Connection, ctx: Context, jti: str, *, now: float) -> TokenRecord | None:
    """What revoking `jti` would revoke: its record; None for an admin when this memory
    did not issue it (an identity provider's); NotFound for anyone else when it is not
    the subject's own (as for a token of another subject)."""
    found = find_token(conn, ctx, jti, now=now)
    if found is None and not ctx.access.is_admin:
        raise NotFound(f"token {jti} not found")
    return found


def revoke(conn: Connection, ctx: Context, jti: str, *, now: float) -> TokenRecord:
    """Revoke `jti` (see `revocable` for who may). Revoking twice is a Conflict."""
    if not jti or len(jti) > MAX_JTI_CHARS:
        raise NotFound("token not found")
    found = revocable(conn, ctx, jti, now=now)
    if found is None:
        conn.execute(insert(tokens).values(jti=jti, revoked_at=now, revoked_by=ctx.subject))
    elif found.revoked_at is not None:
        raise Conflict(f"token {jti} was already revoked")
    else:
        conn.execute(
            update(tokens).where(tokens.c.jti == jti).values(revoked_at=now, revoked_by=ctx.subject)
        )
    # Every server's list is read again on its next check (see RevocationList).
    conn.execute(
        update(meta).where(meta.c.key == REVOCATIONS_KEY).values(value=secrets.token_hex(8))
    )
    return _record(_row(conn, jti), now)


def prune(conn: Connection, *, now: float, expired_before: float | None) -> int:
    """Forget tokens that expired before `expired_before` (revoked or not: an expired
    token is refused anyway; None keeps them), and used or expired sign-in codes.
    Returns how many token records went."""
    gone = 0
    if expired_before is not None:
        gone = conn.execute(
            delete(tokens).where(
                tokens.c.expires_at.is_not(None), tokens.c.expires_at < expired_before
            )
        ).rowcount
    conn.execute(
        delete(signin_codes).where(
            or_(signin_codes.c.used_at.is_not(None), signin_codes.c.expires_at < now)
        )
    )
    return int(gone or 0)


class RevocationList:
    """The revoked token ids, as one process keeps them between reads.

    A check is a set lookup. The list is read again when it is older than
    `max_age_seconds` (and then only if `meta.token_revocations` changed since), or
    at once after this process revoked a token (`invalidate`). So a revocation made
    anywhere is refused everywhere within `max_age_seconds` (auth.revocation_check_
    seconds), at the cost of one small read per process per interval; 0 reads it on
    every check.
    """

    def __init__(
        self, max_age_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_age = max_age_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._version: str | None = None
        self._revoked: frozenset[str] = frozenset()

    def __contains__(self, jti: object) -> bool:
        return jti in self._revoked

    def __len__(self) -> int:
        return len(self._revoked)

    def stale(self) -> bool:
        return self._clock() - self._read_at >= self.max_age

    def invalidate(self) -> None:
        self._read_at = float("-inf")

    def refresh(self, conn: Connection, *, now: float, leeway: float) -> None:
        """Read the list again if it changed since it was read. Tokens expired longer
        ago than `leeway` are left out: the verifier refuses them anyway."""
        started = self._clock()
        with self._lock:
            if self._read_at >= started:
                return  # another thread read it while this one waited
            version = conn.execute(_REVOCATIONS_VERSION).scalar()
            if version != self._version or self._version is None:
                rows = conn.execute(
                    select(tokens.c.jti).where(
                        tokens.c.revoked_at.is_not(None),
                        or_(tokens.c.expires_at.is_(None), tokens.c.expires_at > now - leeway),
                    )
                )
                self._revoked = frozenset(rows.scalars())
                self._version = version
            self._read_at = self._clock()


# --- one-time sign-in codes ----------------------------------------------------


def _digest(code: str) -> str:
    # Kept as a digest: the table (a backup, an export of the file) signs no one in.
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def create_signin_code(conn: Connection, subject: str, now: float) -> tuple[str, float]:
    """A new code for a sign-in link as `subject` (the local owner's): the code, and
    when it stops working."""
    code = secrets.token_urlsafe(32)
    expires_at = now + SIGNIN_CODE_SECONDS
    conn.execute(
        insert(signin_codes).values(
            code_hash=_digest(code), subject=subject, created_at=now, expires_at=expires_at
        )
    )
    return code, expires_at


SIGNIN_REFUSED = "this sign-in link was used already or has expired: run `embornal ui` again"


def redeem_signin_code(conn: Connection, code: str, now: float) -> str:
    """The subject of a valid code, which is used up by this call (in one statement, so
    two servers cannot both take it); Unauthorized for any other code."""
    if not code or len(code) > 128:
        raise Unauthorized(SIGNIN_REFUSED)
    subject = conn.execute(
        update(signin_codes)
        .where(
            signin_codes.c.code_hash == _digest(code),
            signin_codes.c.used_at.is_(None),
            signin_codes.c.expires_at > now,
        )
        .values(used_at=now)
        .returning(signin_codes.c.subject)
    ).scalar()
    if subject is None:
        raise Unauthorized(SIGNIN_REFUSED)
    return str(subject)
