"""Facts: store, read, recall, supersede, delete, history and listing.

Every read goes through the subject's read clause (app.acl.compile): a fact the
subject may not read does not exist for it (NotFound, never Forbidden). Changes
ask the enforcer about the object written. Nothing here commits: the caller's
transaction makes a store of a fact, its tags, its FTS row and its vector one
atomic write.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.exc import IntegrityError

from app import b64url
from app.acl.compile import object_predicate
from app.acl.model import ObjectPattern, Resource
from app.acl.scope import fact_scope
from app.db.dialects import backend
from app.db.tables import effective_fact_tags, fact_tags, facts, meta, paths
from app.errors import Conflict, Forbidden, InvalidInput, NotFound, invalid
from app.rules import MAX_ID, OWNER_KEY, ListSort
from app.services import paths as path_service
from app.services import vector_index
from app.services.context import Context
from app.services.strength import (
    NEW_FACT_STABILITY_DAYS,
    SECONDS_PER_DAY,
    decay_sql,
    last_touch,
    recall_values,
    strength,
)
from app.services.validation import (
    check_content,
    check_limit,
    check_tags,
    fold_path,
    parse_moment,
    parse_tag_filter,
)
from app.services.visibility import (
    SUCCESSOR,
    current_for_scans,
    current_only,
    existed,
    readable,
    visible_current,
)
from app.settings import LimitsSettings

LINK = re.compile(r"\[\[(/[^\]\s]*)\]\]")


@dataclass(frozen=True, slots=True)
class Link:
    """A `[[/path]]` link of a fact, folded; `exists` only for a node the reader sees."""

    path: str
    exists: bool


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact as its reader sees it (SPEC: "A fact in JSON has at least ...").

    Built from rows the database already holds to its rules, so it is a plain frozen
    dataclass, not a validating model; app.schemas.facts.Fact is its JSON shape.
    Pointers to facts the reader may not see are None (`superseded` still tells).
    """

    id: int
    path: str
    content: str
    owner: str
    tags: dict[str, str]
    effective_tags: dict[str, str]
    links: list[Link]
    supersedes_id: int | None
    superseded_by_id: int | None
    superseded: bool
    deleted_at: datetime | None
    created_at: datetime
    last_recall_at: datetime | None
    recall_count: int
    stability_days: float
    strength: float
    embedded: bool


@dataclass(frozen=True, slots=True)
class Similar:
    """An existing fact near one being stored, that its writer may read."""

    id: int
    path: str
    cosine: float


@dataclass(frozen=True, slots=True)
class StoredFact(Fact):
    """A fact as a store hands it back: with the facts it is near (`similar`), and
    whether they were looked for at all (`similar_checked`: not without a vector)."""

    similar: list[Similar] = field(default_factory=list)
    similar_checked: bool = False


def stored(fact: Fact, similar: list[Similar] | None) -> StoredFact:
    """`fact` with its similar facts; `similar` None when they could not be looked for."""
    own = {name: getattr(fact, name) for name in Fact.__dataclass_fields__}
    return StoredFact(**own, similar=list(similar or []), similar_checked=similar is not None)


def similar_paths(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """The path of each fact among `ids` (the caller knows them readable)."""
    if not ids:
        return {}
    query = select(facts.c.id, paths.c.path).join(paths, paths.c.id == facts.c.path_id)
    return dict(conn.execute(query.where(facts.c.id.in_(list(ids)))).all())


@dataclass(frozen=True, slots=True)
class FactPage:
    """A page of a listing; `next_cursor` continues it (None at the end)."""

    facts: list[Fact]
    next_cursor: str | None
    as_of: datetime | None = None  # the moment the page shows, when not now


@dataclass(frozen=True)
class NewFact:
    """A fact to store. `tags` None: not given, which for a supersede means the old
    fact's own tags (decided by app.usecases.memory, for every front end) and
    otherwise none."""

    path: str
    content: str
    tags: Mapping[str, str] | None = None
    supersedes_id: int | None = None


@dataclass(frozen=True)
class CheckedFact(NewFact):
    """A NewFact that validate_new_facts folded and checked: storing it checks nothing twice."""


def _utc(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _time(value: float | None) -> datetime | None:
    return _utc(value) if value is not None else None


# --- reading -----------------------------------------------------------------


def _link_paths(content: str) -> list[str]:
    """The folded paths of [[/path]] links, first occurrence first; not-paths skipped."""
    out: list[str] = []
    for raw in LINK.findall(content):
        try:
            path = fold_path(raw)
        except InvalidInput:
            continue  # not a path: the text stays as written, there is no link
        if path not in out:
            out.append(path)
    return out


def parse_links(conn: Connection, ctx: Context, content: str) -> list[Link]:
    """[[/path]] links, folded; `exists` is true only for a node the subject can see."""
    return links_of(conn, ctx, [content])[0]


def links_of(conn: Connection, ctx: Context, contents: Sequence[str]) -> list[list[Link]]:
    """parse_links for a page of facts at once: one visibility check for all their links."""
    per_fact = [_link_paths(content) for content in contents]
    wanted = {path for links in per_fact for path in links}
    visible = path_service.visible_nodes(conn, ctx, wanted) if wanted else {}
    return [[Link(p, p in visible) for p in links] for links in per_fact]


# A fact's columns as a page shows them: its path, and whether it has a vector (not
# the vector). Columns of a SELECT, or of the recall's UPDATE ... RETURNING
# (recall_visible). Whether a newer fact supersedes it is a query of its own: as a
# correlated subquery in RETURNING, SQLite scanned the whole supersedes index for
# every row (2 ms for 3 rows at 10k facts).
_PATH = select(paths.c.path).where(paths.c.id == facts.c.path_id).scalar_subquery().label("path")
_COLUMNS = (
    *(c for c in facts.c if c.name != "embedding"),
    facts.c.embedding.is_not(None).label("embedded"),
    _PATH,
)


def _hydrate_statements(conn: Connection) -> tuple[Any, Any, Any]:
    """The rows, the tags and the superseded among a page of facts: built once (a page
    is hydrated on every search, app.db.statements)."""
    bk = backend(conn)

    def build() -> tuple[Any, Any, Any]:
        rows = select(*_COLUMNS).where(bk.ids_in(facts.c.id, "ids"))
        # Own tags are the effective ones whose source is the fact itself.
        tags = select(
            effective_fact_tags.c.fact_id,
            effective_fact_tags.c.key,
            effective_fact_tags.c.value,
            effective_fact_tags.c.source,
        ).where(bk.ids_in(effective_fact_tags.c.fact_id, "ids"))
        superseded = select(SUCCESSOR.c.supersedes_id).where(
            bk.ids_in(SUCCESSOR.c.supersedes_id, "ids")
        )
        return rows, tags, superseded

    return bk.statements.get("hydrate", build)


def hydrate(
    conn: Connection, ctx: Context, ids: Sequence[int], *, as_of: float | None = None
) -> list[Fact]:
    """The facts the caller already knows are readable, in the order of `ids`; with
    `as_of`, as they stood then (see _as_facts)."""
    if not ids:
        return []
    rows_stmt, _tags, _superseded = _hydrate_statements(conn)
    found = list(conn.execute(rows_stmt, {"ids": list(ids)}))
    return _as_facts(conn, ctx, ids, found, as_of=as_of)


def _as_facts(
    conn: Connection,
    ctx: Context,
    ids: Sequence[int],
    found: list[Any],
    *,
    as_of: float | None = None,
) -> list[Fact]:
    """Facts from their rows (_COLUMNS), in the order of `ids`; ids without a row are
    left out.

    With `as_of`, the supersede and delete state is the one of that moment: a
    successor created later does not exist yet (`superseded` false, no
    `superseded_by_id`), and a delete made later has not happened (`deleted_at`
    null). The recall state and strength are today's: the memory keeps no record of
    past recalls to rewind them from, and the effective tags come from today's path
    tags (the schema keeps no history of path tags)."""
    now = ctx.clock()
    rows = {row.id: row for row in found}
    ids = [fid for fid in ids if fid in rows]
    if not ids:
        return []
    _rows, tags_stmt, superseded_stmt = _hydrate_statements(conn)
    own: dict[int, dict[str, str]] = {i: {} for i in ids}
    effective: dict[int, dict[str, str]] = {i: {} for i in ids}
    for fid, key, value, source in conn.execute(tags_stmt, {"ids": ids}):
        effective[fid][key] = value
        if source == "fact":
            own[fid][key] = value
    # Neighbours in the supersede chain show only when the subject may read them: a
    # pointer to a hidden fact is null (SPEC, Access control). `superseded` is the one
    # trace a hidden successor leaves, and it tells no more than the fact's absence
    # from default listings (and a 409 on a second supersede) already does.
    if as_of is not None:
        superseded_stmt = superseded_stmt.where(SUCCESSOR.c.created_at <= as_of)
    superseded = set(conn.execute(superseded_stmt, {"ids": ids}).scalars())
    successors: dict[int, int] = {}
    if superseded:
        successor = SUCCESSOR
        readable_successors = ctx.access.statements.get(
            "readable successors",
            lambda: select(successor.c.supersedes_id, successor.c.id).where(
                backend(conn).ids_in(successor.c.supersedes_id, "ids"),
                ctx.access.read_clause(successor.c.id, successor.c.path_id),
            ),
        )
        # `superseded` already holds only ids whose successor existed at as_of.
        successors = dict(conn.execute(readable_successors, {"ids": sorted(superseded)}).all())
    older_ids = {row.supersedes_id for row in rows.values() if row.supersedes_id is not None}
    readable_older: set[int] = set()
    if older_ids:
        readable_among = ctx.access.statements.get(
            "readable",
            lambda: select(facts.c.id).where(
                backend(conn).ids_in(facts.c.id, "ids"), readable(ctx)
            ),
        )
        readable_older = set(conn.execute(readable_among, {"ids": sorted(older_ids)}).scalars())
    links = dict(
        zip(rows, links_of(conn, ctx, [row.content for row in rows.values()]), strict=True)
    )
    out = []
    for fid in ids:
        row = rows[fid]
        elapsed_days = (now - last_touch(row.last_recall_at, row.created_at)) / SECONDS_PER_DAY
        out.append(
            Fact(
                id=row.id,
                path=row.path,
                content=row.content,
                owner=row.owner,
                tags=dict(sorted(own[fid].items())),
                effective_tags=dict(sorted(effective[fid].items())),
                links=links[fid],
                supersedes_id=row.supersedes_id if row.supersedes_id in readable_older else None,
                superseded_by_id=successors.get(fid),
                superseded=fid in superseded,
                deleted_at=_time(
                    row.deleted_at if as_of is None or (row.deleted_at or 0) <= as_of else None
                ),
                created_at=_utc(row.created_at),
                last_recall_at=_time(row.last_recall_at),
                recall_count=row.recall_count,
                stability_days=row.stability_days,
                strength=strength(elapsed_days, row.stability_days),
                embedded=bool(row.embedded),
            )
        )
    return out


def _readable_row(
    conn: Connection,
    ctx: Context,
    fact_id: int,
    *,
    include_deleted: bool,
    as_of: float | None = None,
) -> Any:
    """The fact's row if the subject may read it (and it existed at `as_of`), else
    NotFound; a deleted fact (deleted by `as_of`, with one) only with include_deleted."""
    query = select(facts, paths.c.path).join(paths, paths.c.id == facts.c.path_id)
    query = query.where(facts.c.id == fact_id, readable(ctx), existed(as_of))
    if not include_deleted:
        alive: Any = facts.c.deleted_at.is_(None)
        if as_of is not None:
            alive = or_(alive, facts.c.deleted_at > as_of)
        query = query.where(alive)
    row = conn.execute(query).first()
    if row is None:
        raise NotFound(f"fact {fact_id} not found")
    return row


def moment(conn: Connection, ctx: Context, raw: str | None) -> float | None:
    """`as_of` as UNIX seconds, checked against this memory: an RFC 3339 time with its
    offset, not in the future and not before the memory began (its oldest node: an
    import carries its nodes' times back with its facts). None for None."""
    if raw is None:
        return None
    at = parse_moment(raw).timestamp()
    if at > ctx.clock() + AS_OF_GRAIN:  # the microsecond now is not the future
        message = "as_of is in the future: the memory cannot say what it will believe"
        raise invalid("as_of", message)
    began = conn.execute(select(func.min(paths.c.created_at))).scalar()
    if began is not None and at + AS_OF_GRAIN < began:
        since = _utc(began).isoformat().replace("+00:00", "Z")
        message = f"as_of is before this memory began ({since})"
        raise invalid("as_of", message)
    return at + AS_OF_GRAIN


# Times are shown to the microsecond (RFC 3339 from a float of UNIX seconds, rounded):
# a moment covers the whole microsecond it names, so a fact's created_at as shown, given
# back as as_of, includes that fact (float seconds hold ~0.24 us at today's dates).
AS_OF_GRAIN = 1e-6


def shown_moment(as_of: float | None) -> datetime | None:
    """The moment an answer `as_of` names, as it was asked (to the microsecond)."""
    return None if as_of is None else _utc(as_of - AS_OF_GRAIN)


# The time of a recall, given at execution to statements built once.
_NOW = bindparam("now", type_=Float())


def recall(conn: Connection, ctx: Context, ids: Iterable[int]) -> None:
    """Count a recall of each fact (seed's formula), atomically in one UPDATE."""
    ids = list(ids)
    if ids:
        bk = backend(conn)
        stmt = bk.statements.get(
            "recall",
            lambda: (
                update(facts)
                .where(bk.ids_locked_in(facts.c.id, "ids"), facts.c.deleted_at.is_(None))
                .values(**recall_values(_NOW))
            ),
        )
        conn.execute(stmt, {"ids": ids, "now": ctx.clock()})


def recall_visible(conn: Connection, ctx: Context, ids: Sequence[int]) -> list[Fact]:
    """Count a recall of each fact among `ids` that the subject may still read and that
    is still current, and hand those out, in the order of `ids`: the check, the recall
    and the rows in one UPDATE ... RETURNING (a search ranks in an earlier snapshot; a
    fact deleted or hidden since is neither counted nor handed out)."""
    if not ids:
        return []
    stmt = ctx.access.statements.get(
        "recall visible",
        lambda: (
            update(facts)
            .where(backend(conn).ids_locked_in(facts.c.id, "ids"), visible_current(ctx))
            .values(**recall_values(_NOW))
            .returning(*_COLUMNS)
        ),
    )
    found = list(conn.execute(stmt, {"ids": list(ids), "now": ctx.clock()}))
    return _as_facts(conn, ctx, ids, found)


def get_fact(
    conn: Connection,
    ctx: Context,
    fact_id: int,
    *,
    peek: bool = False,
    include_deleted: bool = False,
    as_of: float | None = None,
) -> Fact:
    """Hand one fact to its reader: a recall unless `peek`, or `as_of` (a look at the
    past is never a recall: it hands out what the memory believed, not what it does)."""
    row = _readable_row(conn, ctx, fact_id, include_deleted=include_deleted, as_of=as_of)
    if not peek and as_of is None and row.deleted_at is None:
        recall(conn, ctx, [fact_id])
    return hydrate(conn, ctx, [fact_id], as_of=as_of)[0]


# Built once, as SUCCESSOR is: the read fragment is cached per column object.
_OLDER = facts.alias("older")
_NEWER = facts.alias("newer")


def history(
    conn: Connection, ctx: Context, fact_id: int, *, as_of: float | None = None
) -> list[Fact]:
    """The supersede chain through `fact_id`, oldest first, deleted facts included;
    with `as_of`, the chain as it stood then (no fact created later).

    The walk steps only through facts the subject may read, and stops at a hidden
    one: a chain visible-hidden-visible shows one side of the hidden fact, never the
    other, as the link between them exists only through the hidden fact.
    """
    _readable_row(conn, ctx, fact_id, include_deleted=True, as_of=as_of)
    older, newer = _OLDER, _NEWER
    back_cte = (
        select(facts.c.id, facts.c.supersedes_id)
        .where(facts.c.id == fact_id)
        .cte("back", recursive=True)
    )
    back_cte = back_cte.union_all(
        select(older.c.id, older.c.supersedes_id).where(
            older.c.id == back_cte.c.supersedes_id,
            ctx.access.read_clause(older.c.id, older.c.path_id),
        )
    )
    fwd_cte = select(facts.c.id).where(facts.c.id == fact_id).cte("fwd", recursive=True)
    fwd_cte = fwd_cte.union_all(
        select(newer.c.id).where(
            newer.c.supersedes_id == fwd_cte.c.id,
            ctx.access.read_clause(newer.c.id, newer.c.path_id),
        )
    )
    chain = select(back_cte.c.id).union(select(fwd_cte.c.id))
    ids = (
        conn.execute(
            select(facts.c.id)
            .where(facts.c.id.in_(chain), readable(ctx), existed(as_of))
            .order_by(facts.c.created_at, facts.c.id)
        )
        .scalars()
        .all()
    )
    return hydrate(conn, ctx, ids, as_of=as_of)


# --- writing -----------------------------------------------------------------


def may_store(conn: Connection, ctx: Context, path: str, own_tags: Mapping[str, str]) -> bool:
    """May the subject store a fact with `own_tags` at `path`?

    Only a path rule grants `write` (the model's mayGrant): the writer chooses the
    tags. Tag rules deny, and they are asked twice: of the fact as it would be
    (its own tags over inherited ones) and of the node as it is, so that a deny on
    a tag the node carries is not dodged by giving the fact another value for it.
    """
    node = path_service.path_resource(conn, path)
    fact = Resource(path, {**node.tags, **own_tags})
    return ctx.access.can("write", fact) and ctx.access.can("write", node)


def _existing_resource(conn: Connection, fact_id: int) -> Resource:
    path = conn.execute(
        select(paths.c.path).join(facts, facts.c.path_id == paths.c.id).where(facts.c.id == fact_id)
    ).scalar_one()
    tags = conn.execute(
        select(effective_fact_tags.c.key, effective_fact_tags.c.value).where(
            effective_fact_tags.c.fact_id == fact_id
        )
    )
    return Resource(path, {k: v for k, v in tags})


def _checked_fact(item: NewFact, limits: LimitsSettings) -> CheckedFact:
    if isinstance(item, CheckedFact):
        return item
    return CheckedFact(
        path=fold_path(item.path),
        content=check_content(item.content, limits.content_chars),
        tags=None if item.tags is None else check_tags(item.tags, limits.tags_per_fact),
        supersedes_id=item.supersedes_id,
    )


def validate_new_facts(
    items: Sequence[NewFact], limits: LimitsSettings, *, error_prefix: Sequence[Any] = ()
) -> list[CheckedFact]:
    """Fold and check facts before anything is written (the use case runs it before
    embedding, so bad input costs no model time). Checked facts pass through as they are."""
    if len(items) > limits.batch_facts:
        message = f"a batch holds at most {limits.batch_facts} facts, not {len(items)}"
        raise InvalidInput(message, errors=[{"loc": list(error_prefix), "msg": message}])
    checked = []
    for index, item in enumerate(items):
        try:
            checked.append(_checked_fact(item, limits))
        except InvalidInput as exc:
            prefix = [*error_prefix, index] if len(items) > 1 or error_prefix else []
            raise _prefix_errors(exc, prefix) if prefix else exc from None
    return checked


def _prefix_errors(exc: InvalidInput, prefix: list[Any]) -> InvalidInput:
    errors = [{**e, "loc": prefix + list(e.get("loc", []))} for e in exc.errors or []]
    return InvalidInput(exc.detail, errors=errors or None)


def store_facts(
    conn: Connection,
    ctx: Context,
    items: Sequence[NewFact],
    *,
    vectors: Sequence[bytes | None] | None = None,
    error_prefix: Sequence[Any] = (),
) -> list[Fact]:
    """Store facts all or nothing; `vectors[i]` is the embedding of item i, or None.

    Items that are not yet CheckedFacts are validated here. The memory writes the
    owner column and the owner tag from the subject; a store
    that carries an owner tag was refused by validation before anything was written.
    """
    checked = validate_new_facts(items, ctx.limits, error_prefix=error_prefix)
    now = ctx.clock()
    # Within one call a path's id and a (path, tags) write decision cannot change:
    # a batch of 1000 facts over few paths pays each lookup once (the path and ACL
    # lookups were ~60% of a batch's time; bench/search_bench.py builds through here).
    path_ids: dict[str, int] = {}
    allowed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    # Where facts.embedding only says that the database holds the vector (PostgreSQL),
    # the row is written with it: an UPDATE afterwards would write every fact twice,
    # each index of `facts` included.
    flag_on_insert = backend(conn).vectors.in_database
    rows, tags = [], []
    for index, item in enumerate(checked):
        if item.supersedes_id is not None:
            _check_supersede(conn, ctx, item.supersedes_id)
        own_tags = {**(item.tags or {}), OWNER_KEY: ctx.subject}
        decision = (item.path, tuple(sorted(own_tags.items())))
        if decision not in allowed:
            if not may_store(conn, ctx, item.path, own_tags):
                raise Forbidden(f"{ctx.subject} may not write at {item.path}")
            allowed.add(decision)
        path_id = path_ids.get(item.path)
        if path_id is None:
            path_id = path_ids[item.path] = path_service.ensure_path(conn, item.path, now)
        rows.append(
            {
                "path_id": path_id,
                "content": item.content,
                "owner": ctx.subject,
                "scope": fact_scope(item.path, own_tags),
                "supersedes_id": item.supersedes_id,
                "created_at": now,
                "recall_count": 0,
                "stability_days": NEW_FACT_STABILITY_DAYS,
                "embedding": vectors[index] if flag_on_insert and vectors else None,
            }
        )
        tags.append(sorted(own_tags.items()))
    # Every row in one statement (multi-row VALUES), the ids back in the items' order:
    # a statement per fact was most of a batch's time on PostgreSQL.
    new_facts = insert(facts).returning(facts.c.id, sort_by_parameter_order=True)
    try:
        ids = list(conn.execute(new_facts, rows).scalars()) if rows else []
    except IntegrityError:
        taken = sorted({item.supersedes_id for item in checked if item.supersedes_id})
        if not taken:
            raise  # not a supersede race: a bug to surface, not a 409
        raise Conflict(
            f"fact {taken[0]} is already superseded"
            if len(taken) == 1
            else f"one of facts {', '.join(map(str, taken))} is already superseded"
        ) from None
    tag_rows = [
        {"fact_id": fact_id, "key": k, "value": v}
        for fact_id, own in zip(ids, tags, strict=True)
        for k, v in own
    ]
    if tag_rows:
        conn.execute(insert(fact_tags), tag_rows)
    embedded = [
        (fact_id, vector)
        for fact_id, vector in zip(ids, vectors or [None] * len(ids), strict=True)
        if vector is not None
    ]
    embedded_ids, blobs = [fid for fid, _ in embedded], [vec for _, vec in embedded]
    if flag_on_insert:
        vector_index.write_codes(conn, embedded_ids, blobs)
    else:
        write_vectors(conn, embedded_ids, blobs)
    return hydrate(conn, ctx, ids)


def store_fact(
    conn: Connection, ctx: Context, item: NewFact, *, vector: bytes | None = None
) -> Fact:
    return store_facts(conn, ctx, [item], vectors=[vector])[0]


def kept_tags(conn: Connection, ctx: Context, ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """The own tags of each fact among `ids` that the subject may read, but the owner
    tag (the memory writes that one from the writer): what a supersede keeps."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = conn.execute(
        select(fact_tags.c.fact_id, fact_tags.c.key, fact_tags.c.value)
        .join(facts, facts.c.id == fact_tags.c.fact_id)
        .where(fact_tags.c.fact_id.in_(wanted), fact_tags.c.key != OWNER_KEY, readable(ctx))
    )
    kept: dict[int, dict[str, str]] = {}
    for fact_id, key, value in rows:
        kept.setdefault(fact_id, {})[key] = value
    return kept


def _check_supersede(conn: Connection, ctx: Context, old_id: int) -> None:
    """Superseding changes the old fact: it must be readable, current and writable.

    Writable as a store is: a path rule on the old fact's node grants it, a tag rule
    on its effective tags can only deny, so `owner=<subject>` does not let a subject
    retire its old facts in places where it may no longer write.
    """
    _readable_row(conn, ctx, old_id, include_deleted=False)
    taken = conn.execute(select(facts.c.id).where(facts.c.supersedes_id == old_id)).scalar()
    if taken is not None:
        raise Conflict(f"fact {old_id} is already superseded")
    if not ctx.access.can("write", _existing_resource(conn, old_id)):
        raise Forbidden(f"{ctx.subject} may not supersede fact {old_id}")


def write_vector(conn: Connection, fact_id: int, vector: bytes) -> None:
    write_vectors(conn, [fact_id], [vector])


def write_vectors(conn: Connection, fact_ids: Sequence[int], vectors: Sequence[bytes]) -> None:
    """Fill the embedding column and the facts' codes in the vector index, in the
    caller's transaction (so the two never disagree, a kill -9 included). One
    statement of each kind per call: a batch of 1000 facts pays them once."""
    if not fact_ids:
        return
    conn.execute(
        update(facts).where(facts.c.id == bindparam("b_id")).values(embedding=bindparam("b_vec")),
        [{"b_id": fid, "b_vec": vec} for fid, vec in zip(fact_ids, vectors, strict=True)],
    )
    vector_index.write_codes(conn, fact_ids, vectors)


def check_delete(conn: Connection, ctx: Context, fact_id: int) -> None:
    """Refuse as a delete of the fact would be refused (NotFound, Forbidden); nothing
    is written. A delete runs it first; the console asks it before its confirmation."""
    _readable_row(conn, ctx, fact_id, include_deleted=False)
    if not ctx.access.can("delete", _existing_resource(conn, fact_id)):
        raise Forbidden(f"{ctx.subject} may not delete fact {fact_id}")


def delete_fact(conn: Connection, ctx: Context, fact_id: int) -> None:
    """Set deleted_at; the fact drops out of everything but history."""
    check_delete(conn, ctx, fact_id)
    conn.execute(update(facts).where(facts.c.id == fact_id).values(deleted_at=ctx.clock()))


def recall_fact(conn: Connection, ctx: Context, fact_id: int) -> Fact:
    return get_fact(conn, ctx, fact_id, peek=False)


# --- listing -----------------------------------------------------------------


# Cursors are signed (HMAC-SHA256) with the database's own key from `meta`
# (migration 0003), so any process on the database accepts them and nobody else can
# make one: a cursor is opaque to clients, and one the server did not make is a 422.
CURSOR_KEY = "cursor_key"
_CURSOR_CONTEXT = b"embornal cursor v1\x00"  # this key signs nothing else, but say what
_BAD_CURSOR = "cursor is not one this listing gave out (or the sort or as_of changed)"


def _cursor_key(conn: Connection) -> bytes:
    value = conn.execute(select(meta.c.value).where(meta.c.key == CURSOR_KEY)).scalar()
    if not value:
        raise RuntimeError("meta holds no cursor key: the database is not at head")
    return bytes.fromhex(value)


def _cursor_mac(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, _CURSOR_CONTEXT + payload, hashlib.sha256).digest()


def _encode_cursor(conn: Connection, data: dict[str, Any]) -> str:
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    return f"{b64url.encode(payload)}.{b64url.encode(_cursor_mac(_cursor_key(conn), payload))}"


def _decode_cursor(
    conn: Connection, cursor: str, sort: str, as_of: float | None = None
) -> dict[str, Any]:
    """The position a cursor of ours holds, or InvalidInput naming `cursor`.

    The signature is checked before the payload is parsed at all; the payload's
    values are checked again after it, so even a cursor made by a buggy older
    build cannot reach SQL with a value SQLite cannot hold.
    """
    try:
        encoded_payload, dot, encoded_mac = cursor.partition(".")
        if not dot:
            raise ValueError("no signature")
        payload, mac = b64url.decode(encoded_payload), b64url.decode(encoded_mac)
        if not hmac.compare_digest(mac, _cursor_mac(_cursor_key(conn), payload)):
            raise ValueError("bad signature")
        data = json.loads(payload, parse_constant=_no_constant)
        if not isinstance(data, dict) or data.get("sort") != sort:
            raise ValueError("another listing's cursor")
        if data.get("as_of") != as_of:
            raise ValueError("a listing at another moment")
        if not _is_int(data.get("id"), 1, MAX_ID):
            raise ValueError("id out of range")
        if sort == "strength" and not (_is_finite(data.get("key")) and _is_finite(data.get("now"))):
            raise ValueError("strength position is not a finite number")
        if as_of is not None and sort == "created" and not _is_finite(data.get("key")):
            raise ValueError("as_of position is not a finite number")
        return data
    except (ValueError, RecursionError):
        # json.JSONDecodeError and binascii.Error are ValueErrors; so is a huge integer.
        raise invalid("cursor", _BAD_CURSOR) from None


def listing_cursor(conn: Connection, listing: str, last_id: int) -> str:
    """A signed cursor for another listing by descending id (the activity record): the
    same key and checks as the fact listings', its `listing` name kept apart from theirs."""
    return _encode_cursor(conn, {"sort": listing, "id": last_id})


def listing_position(conn: Connection, cursor: str, listing: str) -> int:
    """The last id a `listing_cursor` of `listing` names; InvalidInput for any other."""
    return int(_decode_cursor(conn, cursor, listing)["id"])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _is_int(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _is_finite(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def subtree_filter(raw_under: str | None) -> Any | None:
    if not raw_under:
        return None
    under = fold_path(raw_under, field="under")
    return object_predicate(ObjectPattern("subtree", under), facts.c.id, facts.c.path_id)


def tag_filters(tags: Sequence[str] | None) -> list[Any]:
    """Each `key=value` must hold among the fact's effective tags."""
    filters = []
    for text in tags or []:
        key, value = parse_tag_filter(text)
        pattern = ObjectPattern("tag", key=key, value=value)
        filters.append(object_predicate(pattern, facts.c.id, facts.c.path_id))
    return filters


def list_facts(
    conn: Connection,
    ctx: Context,
    *,
    under: str | None = None,
    at: str | None = None,
    tags: Sequence[str] | None = None,
    sort: ListSort = "created",
    limit: int = 50,
    cursor: str | None = None,
    as_of: float | None = None,
) -> FactPage:
    """Browse current facts (not a recall): newest first, or strongest first; of the
    subtree `under`, or of the one node `at` (not below it). With `as_of`, the facts
    current at that moment (app.services.visibility.current_only)."""
    check_limit(limit)
    position = _decode_cursor(conn, cursor, sort, as_of) if cursor else None
    # A strength listing keeps the clock of its first page, so pages never overlap.
    now = float(position["now"]) if position and sort == "strength" else ctx.clock()
    query = select(facts.c.id).where(readable(ctx), current_only(as_of), *tag_filters(tags))
    scope = subtree_filter(under)
    if scope is not None:
        query = query.where(scope)
    if at is not None:
        node = select(paths.c.id).where(paths.c.path == fold_path(at, field="at"))
        query = query.where(facts.c.path_id == node.scalar_subquery())
    if sort == "strength":
        decay = decay_sql(now)
        query = query.add_columns(decay.label("key")).order_by(decay, facts.c.id)
        if position:
            key, last = float(position["key"]), int(position["id"])
            query = query.where(or_(decay > key, and_(decay == key, facts.c.id > last)))
    elif as_of is not None:
        # Newest first as of the moment: by creation time, from the moment backwards
        # (ix_facts_created_at), not past every fact created since.
        query = query.add_columns(facts.c.created_at.label("key"))
        query = query.order_by(facts.c.created_at.desc(), facts.c.id.desc())
        if position:
            key, last = float(position["key"]), int(position["id"])
            query = query.where(
                or_(
                    facts.c.created_at < key,
                    and_(facts.c.created_at == key, facts.c.id < last),
                )
            )
    else:
        query = query.order_by(facts.c.id.desc())
        if position:
            query = query.where(facts.c.id < int(position["id"]))
    rows = conn.execute(query.limit(limit + 1)).all()
    page, more = rows[:limit], len(rows) > limit
    next_cursor = None
    if more and page:
        last_row = page[-1]
        data: dict[str, Any] = {"sort": sort, "id": last_row.id}
        if as_of is not None:
            data["as_of"] = as_of
        if sort == "strength":
            data |= {"key": last_row.key, "now": now}
        elif as_of is not None:
            data["key"] = last_row.key
        next_cursor = _encode_cursor(conn, data)
    facts_out = hydrate(conn, ctx, [row.id for row in page], as_of=as_of)
    return FactPage(facts_out, next_cursor, shown_moment(as_of))


def totals(conn: Connection) -> dict[str, int]:
    """Counts over the whole memory, whoever may read what: for operators' metrics."""
    total, deleted, pending = conn.execute(
        select(
            func.count(),
            func.count(facts.c.deleted_at),
            func.count(case((facts.c.embedding.is_(None) & facts.c.deleted_at.is_(None), 1))),
        ).select_from(facts)
    ).one()
    return {"facts": total, "deleted": deleted, "pending_embeddings": pending}


def pending_visible(conn: Connection, ctx: Context) -> int:
    """How many current facts the subject may read wait for the model (the queue's
    partial index), unlike `totals` counting none it cannot read."""
    waiting = (
        select(func.count())
        .select_from(facts)
        .where(
            facts.c.embedding.is_(None),
            facts.c.deleted_at.is_(None),
            readable(ctx),
            current_only(),
        )
    )
    return int(conn.execute(waiting).scalar_one())


@dataclass(frozen=True, slots=True)
class Standing:
    """The subject's current facts at a glance: how many, the strongest, the weakest."""

    count: int
    strongest: list[Fact]
    fading: list[Fact]


def standing(conn: Connection, ctx: Context, *, limit: int = 10) -> Standing:
    """Count the current facts the subject may read, and take the `limit` strongest
    (as `list_facts(sort="strength")` orders them) and weakest, in one pass.

    The visible facts and their decay are materialized once and read three times: three
    queries would each evaluate the read fragment and the supersede test on every row
    (at 100k facts, ~40 ms a pass even over SQLite's covering index ix_facts_live).
    """
    check_limit(limit)
    decay = decay_sql(ctx.clock())
    visible = (
        select(facts.c.id, decay.label("decay"))
        .where(readable(ctx), current_for_scans())
        .cte("visible")
        .prefix_with("MATERIALIZED")
    )
    strong = select(visible.c.id).order_by(visible.c.decay, visible.c.id).limit(limit).subquery()
    weak = (
        select(visible.c.id).order_by(visible.c.decay.desc(), visible.c.id).limit(limit).subquery()
    )
    rows = conn.execute(
        union_all(
            select(literal(0).label("kind"), strong.c.id.label("value")),
            select(literal(1), weak.c.id),
            select(literal(2), func.count()).select_from(visible),
        )
    ).all()
    picked: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for kind, value in rows:
        picked[kind].append(int(value))
    # A union keeps no order: each list is ordered again by the ranking it came from.
    found = {f.id: f for f in hydrate(conn, ctx, sorted(set(picked[0]) | set(picked[1])))}
    return Standing(
        count=picked[2][0] if picked[2] else 0,
        strongest=sorted((found[i] for i in picked[0]), key=lambda f: (-f.strength, f.id)),
        fading=sorted((found[i] for i in picked[1]), key=lambda f: (f.strength, f.id)),
    )


def count_under(conn: Connection, ctx: Context, under: str) -> int:
    """Current facts the subject may read in the subtree `under`."""
    query = select(func.count()).select_from(facts).where(readable(ctx), current_for_scans())
    scope = subtree_filter(under)
    if scope is not None:
        query = query.where(scope)
    return int(conn.execute(query).scalar_one())


def fact_rights(conn: Connection, ctx: Context, fact_id: int) -> dict[str, bool]:
    """Whether the subject may supersede and delete a fact it can read, decided as the
    changes themselves decide (`_check_supersede`, `delete_fact`)."""
    resource = _existing_resource(conn, fact_id)
    return {
        "supersede": ctx.access.can("write", resource),
        "delete": ctx.access.can("delete", resource),
    }
