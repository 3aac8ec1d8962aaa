"""Import: load a checked export into the memory, restoring or merging.

The import is an admin restore, not a store by the importer: facts keep their
owner, times and recall state.

- restore: into a fresh memory, one that holds only what its migration wrote
  (app.db.seed: the /memory facts, the default policies, no other node and no path
  tag), the file's facts replace its facts and keep their ids.
- merge: into any other memory, facts are appended with new ids (supersede chains
  follow the new ids); a fact whose (path, content, owner, created_at) the memory
  already holds is skipped as already imported, so importing a file twice changes
  nothing the second time. The /memory facts are the exception: each memory's
  migration wrote its own at its own creation time, so one of the file's is already
  present when the memory holds its own with the same path, content and owner.

A file's policy lines and path tags decide who reads what: one line can make a
subtree public or a stranger an admin. They are applied only when the importer asks
(`with_policies`), and the report names each one added. Then a restore's policies
are the file's (which must leave the importer an admin); a merge adds the lines the
memory lacks (never removes one) and the path tags it lacks (a key the memory has
keeps its value: its own access decisions rest on it). Without it, the memory's
policies and path tags stay as they are, and the report counts what was left out.

Either way the import runs in the caller's one write transaction, after every
line was checked (format.read_export): a bad line stops it, named by its number,
and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sqlalchemy import Connection, delete, func, insert, select, update

from app.acl.enforcer import admins
from app.acl.model import ADMIN, EVERYONE
from app.acl.scope import fact_scope
from app.db import migrate
from app.db.dialects import backend
from app.db.seed import FRESH_POLICIES, MEMORY_FACTS, SEED_PATHS, is_seed_fact
from app.db.tables import (
    casbin_rule,
    fact_tags,
    facts,
    path_tags,
    paths,
)
from app.errors import Conflict, InvalidInput
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services import vector_index
from app.services.context import Context
from app.services.facts import write_vector
from app.services.transfer.export import require_admin
from app.services.transfer.format import (
    ExportFile,
    FactRecord,
    PathRecord,
    PolicyRecord,
    check_owners,
    check_successor_time,
)

ProgressCallback = Callable[[int, int], None]
PROGRESS_EVERY = 256  # facts between two progress reports


# --- import ------------------------------------------------------------------


@dataclass
class ImportReport:
    mode: Literal["restore", "merge"]
    with_policies: bool = False
    paths_added: int = 0
    # Each one applied, named: "/a/b visibility=public", "g, bob, admin".
    path_tags_added: list[str] = field(default_factory=list)
    path_tags_kept: int = 0  # the memory had the key with another value: it kept its own
    facts_added: int = 0
    facts_skipped: int = 0  # already in the memory
    # Facts the memory held before, superseded by one of the file's: each by its id, so
    # that the person importing sees what of the memory the file retired.
    memory_facts_superseded: list[int] = field(default_factory=list)
    embeddings_written: int = 0
    facts_waiting_for_embedding: int = 0  # added without a vector that fits this memory
    policies_added: list[str] = field(default_factory=list)
    # In the file, left out because the import was not asked to apply them.
    path_tags_not_applied: int = 0
    policies_not_applied: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def import_memory(
    conn: Connection,
    ctx: Context,
    data: ExportFile,
    *,
    with_policies: bool = False,
    on_progress: ProgressCallback | None = None,
) -> ImportReport:
    """Load a checked export into the memory, in the caller's transaction.

    Restore into a fresh memory, merge into any other; the file's policy lines and
    path tags only `with_policies` (see the module's docstring). Raises before the
    caller commits when the file cannot be applied whole. `on_progress(done, total)`
    is told of the facts as they are loaded.
    """
    require_admin(ctx)
    restore = is_fresh(conn)
    report = ImportReport(mode="restore" if restore else "merge", with_policies=with_policies)
    if restore and with_policies:
        _check_keeps_admin(data.policies, ctx.subject)
    if restore:
        _clear_fresh(conn, policies=with_policies)
    # Checked by read_export against the roles of a moment ago; the roles now decide.
    check_owners(data, policy_service.role_names(conn))
    now = ctx.clock()
    paths_before = conn.execute(select(func.count()).select_from(paths)).scalar_one()
    _import_paths(conn, data.paths, now, report, with_policies=with_policies)
    # A load that brings more vectors than the memory holds builds the vector index
    # after it rather than keep it with every fact (PostgreSQL's HNSW: app.db.dialects).
    vectors = backend(conn).vectors
    incoming = sum(1 for record in data.facts if record.embedding is not None)
    paused = incoming > vector_index.code_count(conn) and vectors.pause_index(conn)
    _import_facts(conn, data, restore, report, on_progress)
    if paused:
        vectors.build_index(conn)
    if restore:
        backend(conn).after_explicit_ids(conn, facts)  # a restore kept the file's ids
    report.paths_added = (
        conn.execute(select(func.count()).select_from(paths)).scalar_one() - paths_before
    )
    if not with_policies:
        report.policies_not_applied = len(data.policies)
        return report
    for record in _in_adding_order(data.policies):
        try:
            added = policy_service.add_policy(conn, ctx, str(record.policy))
        except Conflict:
            continue  # already present: "added if absent"
        except InvalidInput as exc:  # a role that would take a subject's name
            raise InvalidInput(f"line {record.line}: {exc.detail}") from None
        report.policies_added.append(str(added))
    return report


def _in_adding_order(policies: list[PolicyRecord]) -> list[PolicyRecord]:
    """g lines first, each role made before it appears as a member; then p lines.

    add_policy refuses to make a name that is in use as a subject a role (see
    app.services.policies.check_role_collision), and a p line or a membership
    written before the role exists reads as such a use. An export lists p lines
    first, so the file's order would refuse its own roles.
    """
    parents: dict[str, set[str]] = {}
    for record in policies:
        if record.policy.ptype == "g":
            member, role = record.policy.values
            parents.setdefault(member, set()).add(role)

    def height(name: str, seen: frozenset[str] = frozenset()) -> int:
        # How many role links lie above `name`; a cycle counts once.
        above = parents.get(name, set()) - seen
        return 1 + max((height(r, seen | {name}) for r in above), default=-1) if above else 0

    g_lines = [r for r in policies if r.policy.ptype == "g"]
    # `g, alice, team` must come before `g, team, staff`: higher roles' lines go last.
    g_lines.sort(key=lambda r: -height(r.policy.values[1]))
    return g_lines + [r for r in policies if r.policy.ptype != "g"]


def is_fresh(conn: Connection) -> bool:
    """True when the memory holds exactly what its migration wrote, so a restore loses
    nothing of the user's. Recall counts and embeddings of the /memory facts do not
    count as the user's: they are the migration's text, read or embedded."""
    if conn.execute(select(func.count()).select_from(path_tags)).scalar_one():
        return False
    if set(conn.execute(select(paths.c.path)).scalars()) != SEED_PATHS:
        return False
    rows = conn.execute(
        select(
            facts.c.id,
            paths.c.path,
            facts.c.content,
            facts.c.owner,
            facts.c.supersedes_id,
            facts.c.deleted_at,
        ).join(paths, paths.c.id == facts.c.path_id)
    ).all()
    if len(rows) != len(MEMORY_FACTS) or not all(
        is_seed_fact(fact_id, path, content, owner) and supersedes is None and deleted is None
        for fact_id, path, content, owner, supersedes, deleted in rows
    ):
        return False
    rules = conn.execute(
        select(casbin_rule.c.ptype, *(casbin_rule.c[f"v{i}"] for i in range(6)))
    ).all()
    present = sorted(tuple(v for v in row if v) for row in rules)
    defaults = sorted(tuple(v for v in rule if v) for rule in FRESH_POLICIES)
    return present == defaults


def _check_keeps_admin(policies: list[PolicyRecord], subject: str) -> None:
    """A restore replaces the policies: refuse one that locks the importer out of them."""
    holders = admins(
        (r.policy.values[0], r.policy.values[1]) for r in policies if r.policy.ptype == "g"
    )
    if subject not in holders and EVERYONE not in holders:
        raise InvalidInput(
            f"this memory is fresh, so the import would restore the file's policies, and "
            f"they leave {subject!r} without the {ADMIN!r} role; add the line "
            f'"g, {subject}, {ADMIN}" to the file'
        )


def _clear_fresh(conn: Connection, *, policies: bool) -> None:
    """Remove what the migration wrote so the file's facts keep their ids (and, when
    the file's policies replace them, the default policies)."""
    conn.execute(delete(fact_tags))
    # Codes, cells and log go, and a new generation makes running servers' in-memory
    # indexes reload whole (see app.services.vector_index).
    vector_index.clear_codes(conn)
    conn.execute(delete(facts))  # the FTS rows go with them (facts_fts_ad)
    if policies:
        conn.execute(delete(casbin_rule))


def _import_paths(
    conn: Connection,
    records: list[PathRecord],
    now: float,
    report: ImportReport,
    *,
    with_policies: bool,
) -> None:
    for record in sorted(records, key=lambda r: r.path):
        created_at = record.created_at if record.created_at is not None else now
        node = path_service.ensure_path(conn, record.path, created_at)
        # A node exists since the first time either memory had it.
        conn.execute(
            update(paths)
            .where(paths.c.id == node, paths.c.created_at > created_at)
            .values(created_at=created_at)
        )
        if not record.tags:
            continue
        if not with_policies:
            report.path_tags_not_applied += len(record.tags)
            continue
        present = path_service.own_path_tags(conn, node)
        try:
            path_service.refuse_too_many_tags(record.path, present, record.tags)
        except InvalidInput as exc:
            raise InvalidInput(f"line {record.line}: {exc.detail}") from None
        for key, value in record.tags.items():
            if key not in present:
                conn.execute(insert(path_tags).values(path_id=node, key=key, value=value))
                report.path_tags_added.append(f"{record.path} {key}={value}")
            elif present[key] != value:
                report.path_tags_kept += 1


def _import_facts(
    conn: Connection,
    data: ExportFile,
    restore: bool,
    report: ImportReport,
    on_progress: ProgressCallback | None,
) -> None:
    vectors_fit = data.embedding_width == migrate.stored_width(conn)
    held = None if restore else _HeldFacts(conn)
    new_ids: dict[int, int] = {}  # the file's id -> this memory's id
    path_ids: dict[str, int] = {}
    total = len(data.facts)
    for done, record in enumerate(data.facts):
        if on_progress is not None and done % PROGRESS_EVERY == 0:
            on_progress(done, total)
        supersedes = new_ids[record.supersedes_id] if record.supersedes_id is not None else None
        existing = held.claim(record) if held is not None else None
        if existing is not None:
            new_ids[record.id] = existing
            report.facts_skipped += 1
            continue
        if supersedes is not None:
            taken, replaced_at = conn.execute(
                select(
                    select(facts.c.id).where(facts.c.supersedes_id == supersedes).scalar_subquery(),
                    select(facts.c.created_at).where(facts.c.id == supersedes).scalar_subquery(),
                )
            ).one()
            if taken is not None:
                raise Conflict(
                    f"line {record.line}: fact {record.id} supersedes fact "
                    f"{record.supersedes_id}, which this memory holds as #{supersedes} and "
                    f"has already superseded with #{taken}"
                )
            if held is not None and supersedes in held.claimed:
                # The memory's own fact (a starter is held by its text, not its time).
                try:
                    check_successor_time(record, replaced_at)
                except InvalidInput as exc:
                    raise InvalidInput(f"line {record.line}: {exc.detail}") from None
                report.memory_facts_superseded.append(supersedes)
        path_id = path_ids.get(record.path)
        if path_id is None:
            path_id = path_service.ensure_path(conn, record.path, record.created_at)
            path_ids[record.path] = path_id
        values: dict[str, Any] = {
            "path_id": path_id,
            "content": record.content,
            "owner": record.owner,
            "scope": fact_scope(record.path, record.tags),
            "supersedes_id": supersedes,
            "deleted_at": record.deleted_at,
            "created_at": record.created_at,
            "last_recall_at": record.last_recall_at,
            "recall_count": record.recall_count,
            "stability_days": record.stability_days,
        }
        if restore:
            values["id"] = record.id
        # INSERT is allowed on facts (facts_immutable guards UPDATE); facts_fts_ai
        # writes the FTS row in this same transaction.
        fact_id = conn.execute(insert(facts).values(**values).returning(facts.c.id)).scalar_one()
        conn.execute(
            insert(fact_tags),
            [{"fact_id": fact_id, "key": k, "value": v} for k, v in sorted(record.tags.items())],
        )
        if record.embedding is not None and vectors_fit:
            # Through write_vector, so vector_log tells running servers' indexes.
            write_vector(conn, fact_id, record.embedding)
            report.embeddings_written += 1
        elif record.deleted_at is None:
            report.facts_waiting_for_embedding += 1  # queued for `memory reindex`
        new_ids[record.id] = fact_id
        report.facts_added += 1
    if on_progress is not None:
        on_progress(total, total)


class _HeldFacts:
    """The facts the memory held before the import, found by (path, owner, created_at).

    Read in one pass up front. Looking each line up by path instead visits every
    fact of that path per line, and rows that carry an embedding are a page each:
    42 s for a re-import of 20k facts, against about one second this way. Loaded
    before anything is inserted, so two equal lines of one file (a batch may store
    the same text twice at one instant) stay two facts.

    The migration's /memory facts are held by text: two memories' copies never share
    a created_at (each was written when its memory was made), and without this every
    merge would add the file's copies beside the memory's own.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.claimed: set[int] = set()
        self.by_key: dict[tuple[str, str, float], list[int]] = {}
        for fact_id, path, owner, created_at in conn.execute(
            select(facts.c.id, paths.c.path, facts.c.owner, facts.c.created_at)
            .join(paths, paths.c.id == facts.c.path_id)
            .order_by(facts.c.id)
        ):
            self.by_key.setdefault((path, owner, created_at), []).append(fact_id)
        self.seed_facts: dict[str, int] = {}
        for fact_id, path, content, owner in conn.execute(
            select(facts.c.id, paths.c.path, facts.c.content, facts.c.owner)
            .join(paths, paths.c.id == facts.c.path_id)
            .where(facts.c.id <= len(MEMORY_FACTS))
        ):
            if is_seed_fact(fact_id, path, content, owner):
                self.seed_facts[content] = fact_id

    def claim(self, record: FactRecord) -> int | None:
        """The id of an unclaimed held fact equal to `record`, now claimed; or None."""
        if is_seed_fact(record.id, record.path, record.content, record.owner):
            own = self.seed_facts.get(record.content)
            if own is not None and own not in self.claimed:
                self.claimed.add(own)
                return own
        for fact_id in self.by_key.get((record.path, record.owner, record.created_at), ()):
            if fact_id in self.claimed:
                continue
            content = self.conn.execute(
                select(facts.c.content).where(facts.c.id == fact_id)
            ).scalar_one()
            if content == record.content:
                self.claimed.add(fact_id)
                return fact_id
        return None
