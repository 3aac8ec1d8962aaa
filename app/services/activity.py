"""The activity record: who changed what, when, and through which front end.

An entry is written by the use case in the transaction of the change it records
(app.usecases.memory), so a change that does not commit leaves none. It names what
changed (a fact's id and path, a tag, a policy line, a jti), never a fact's content.

Who sees what: an admin every entry; any other subject its own entries only, and of
those none that names a fact it may not read now, nor a node it may not see (one
that does not exist for it): the compiled read fragment decides, as for every read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, delete, exists, insert, or_, select

from app.db.tables import activity, facts
from app.errors import Forbidden, invalid
from app.rules import ACTIVITY_ACTIONS, MAX_ID, ActivityAction, FrontEnd
from app.services import paths as path_service
from app.services.context import Context
from app.services.facts import listing_cursor, listing_position
from app.services.validation import check_limit, fold_path, parse_moment
from app.services.visibility import readable

LISTING = "activity"
# What an entry may name besides its action (each a column of `activity`).
WHAT = ("fact_id", "supersedes_id", "path", "tag", "policy", "jti", "note")
# Deleted per statement when pruning: a short write lock at a time.
PRUNE_BATCH = 5000


@dataclass(frozen=True, slots=True)
class Entry:
    """One change: when, who, through which front end, what kind, and what it named."""

    id: int
    at: datetime
    subject: str
    via: str
    action: str
    fact_id: int | None = None
    supersedes_id: int | None = None
    path: str | None = None
    tag: str | None = None
    policy: str | None = None
    jti: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class EntryPage:
    entries: list[Entry]
    next_cursor: str | None


def record(
    conn: Connection,
    ctx: Context,
    via: FrontEnd,
    action: ActivityAction,
    **what: Any,
) -> None:
    """Record one change made by `ctx.subject` in the caller's transaction."""
    record_many(conn, ctx, via, action, [what])


def record_many(
    conn: Connection,
    ctx: Context,
    via: FrontEnd,
    action: ActivityAction,
    items: Sequence[Mapping[str, Any]],
) -> None:
    """Record changes of one kind at once (a batch of stores is one statement)."""
    if not items:
        return
    now = ctx.clock()
    rows = []
    for what in items:
        unknown = set(what) - set(WHAT)
        if unknown:
            raise TypeError(f"an activity entry has no {sorted(unknown)}")
        row = dict.fromkeys(WHAT) | dict(what)
        rows.append(row | {"at": now, "subject": ctx.subject, "via": via, "action": action})
    # One row is one plain INSERT; several, one executemany.
    conn.execute(insert(activity), rows[0] if len(rows) == 1 else rows)


@dataclass(frozen=True)
class Filters:
    """What a listing asks for; each None matches everything."""

    subject: str | None = None
    action: str | None = None
    under: str | None = None
    since: str | None = None
    until: str | None = None
    fact_id: int | None = None


def _conditions(ctx: Context, wanted: Filters) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    subject = wanted.subject
    if not ctx.access.is_admin:
        if subject is not None and subject != ctx.subject:
            raise Forbidden(
                "a subject sees its own changes only; other subjects' need the admin role"
            )
        subject = ctx.subject
        # An entry naming a fact the subject may not read now does not exist for it.
        for column in (activity.c.fact_id, activity.c.supersedes_id):
            where.append(or_(column.is_(None), _readable_fact(ctx, column)))
    if subject is not None:
        where.append(activity.c.subject == subject)
    if wanted.action is not None:
        if wanted.action not in ACTIVITY_ACTIONS:
            message = f"action must be one of {', '.join(ACTIVITY_ACTIONS)}"
            raise invalid("action", message)
        where.append(activity.c.action == wanted.action)
    if wanted.under is not None:
        under = fold_path(wanted.under, field="under")
        if under != "/":
            where.append(
                or_(
                    activity.c.path == under,
                    activity.c.path.startswith(under + "/", autoescape=True),
                )
            )
        else:
            where.append(activity.c.path.is_not(None))
    if wanted.since is not None:
        where.append(activity.c.at >= parse_moment(wanted.since, "since").timestamp())
    if wanted.until is not None:
        where.append(activity.c.at <= parse_moment(wanted.until, "until").timestamp())
    if wanted.fact_id is not None:
        if not 1 <= wanted.fact_id <= MAX_ID:
            message = f"fact_id must be from 1 to {MAX_ID}"
            raise invalid("fact_id", message)
        where.append(
            or_(activity.c.fact_id == wanted.fact_id, activity.c.supersedes_id == wanted.fact_id)
        )
    return where


def _readable_fact(ctx: Context, column: Any) -> ColumnElement[bool]:
    return exists(select(facts.c.id).where(facts.c.id == column, readable(ctx)))


def list_entries(
    conn: Connection,
    ctx: Context,
    wanted: Filters,
    *,
    limit: int = 50,
    cursor: str | None = None,
) -> EntryPage:
    """Entries newest first, a page at a time (`next_cursor` continues it)."""
    check_limit(limit)
    where = _conditions(ctx, wanted)
    before = listing_position(conn, cursor, LISTING) if cursor else None
    kept: list[Any] = []
    # A non-admin's entries about nodes it cannot see are dropped after the query (node
    # visibility is not one SQL fragment): read on until a page and one more are kept,
    # or the record ends.
    while True:
        query = select(activity).where(*where).order_by(activity.c.id.desc())
        if before is not None:
            query = query.where(activity.c.id < before)
        batch = conn.execute(query.limit(limit + 1)).all()
        if not batch:
            break
        shown = _visible(conn, ctx, batch)
        kept += [row for row in batch if row.id in shown]
        before = batch[-1].id
        if len(kept) > limit or len(batch) <= limit:
            break
    page, more = kept[:limit], len(kept) > limit
    next_cursor = listing_cursor(conn, LISTING, page[-1].id) if more else None
    return EntryPage([_entry(row) for row in page], next_cursor)


def _visible(conn: Connection, ctx: Context, rows: Sequence[Any]) -> set[int]:
    """The ids of the rows the subject may see (the SQL already kept readable facts)."""
    if ctx.access.is_admin:
        return {row.id for row in rows}
    nodes = {row.path for row in rows if row.path is not None and row.fact_id is None}
    seen = path_service.visible_nodes(conn, ctx, nodes) if nodes else {}
    return {
        row.id for row in rows if row.path is None or row.fact_id is not None or row.path in seen
    }


def _entry(row: Any) -> Entry:
    return Entry(
        id=row.id,
        at=datetime.fromtimestamp(row.at, UTC),
        subject=row.subject,
        via=row.via,
        action=row.action,
        **{name: getattr(row, name) for name in WHAT},
    )


def prune(conn: Connection, before: float) -> int:
    """Delete the entries older than `before` among the PRUNE_BATCH oldest; how many
    went (call again while it is PRUNE_BATCH).

    Entries are appended in time order, so the oldest are the lowest ids: a batch reads
    the start of the table by id and needs no index on `at`, which would cost every
    change one more page to write. (Replicas' clocks a moment apart can put an entry a
    moment out of order: it goes with the next pass.)"""
    oldest = select(activity.c.id).order_by(activity.c.id).limit(PRUNE_BATCH).subquery()
    gone = delete(activity).where(activity.c.id.in_(select(oldest.c.id)), activity.c.at < before)
    return int(conn.execute(gone).rowcount or 0)
