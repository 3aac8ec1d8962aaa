"""Moving a memory: an online backup of memory.db, and export/import as JSON Lines.

A backup is the database file itself, pages and indexes included: it is what to
keep. An export is the memory's content, for moving it between machines, schema
revisions or vector widths, or for merging one memory into another.

Export format, version 1: one JSON object a line, in this order:

    {"type": "embornal-export", "version": 1, "embedding_width": 768}
    {"type": "path", "path": "/a", "created_at": 1800000000.0, "tags": {"k": "v"}}
    {"type": "fact", "id": 7, "path": "/a", "content": "...", "owner": "alice",
     "tags": {"owner": "alice"}, "supersedes_id": null, "deleted_at": null,
     "created_at": 1800000000.0, "last_recall_at": null, "recall_count": 0,
     "stability_days": 1.0, "embedding": "<base64 float32 LE, --with-embeddings>"}
    {"type": "policy", "line": "p, alice, path:/a/*, read, allow"}
    {"type": "end", "paths": 3, "facts": 12, "policies": 5}

Every node is a path line; facts come in id order; times are UNIX seconds as
stored (a JSON float reads back as the same double, which is what lets an import
recognise a fact it already holds). The end line makes a file that was cut short
fail instead of importing half a memory.

Import rules (the import is an admin restore, not a store by the importer: facts
keep their owner, times and recall state):

- restore: into a fresh memory, one that holds only what its migration wrote
  (the /memory facts, the default policies, no other node and no path tag), the
  file replaces all of it: facts keep their ids and the policies are the file's.
- merge: into any other memory, facts are appended with new ids (supersede chains
  follow the new ids); a fact whose (path, content, owner, created_at) the memory
  already holds is skipped as already imported, so importing a file twice changes
  nothing the second time. A path tag the memory already has keeps its value (the
  memory's own access decisions rest on it); missing ones are added. Policies are
  added when absent, never removed.

Either way the import is one transaction, and every line is checked before
anything is written: a bad line stops it, named by its number.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import sqlean
import sqlite_vec
from sqlalchemy import (
    Connection,
    Engine,
    delete,
    func,
    insert,
    select,
    update,
)

from app.acl.model import ADMIN, EVERYONE, PolicyLine, parse_policy_line
from app.auth.subjects import validate_subject
from app.db import migrate
from app.db.dialects import backend
from app.db.tables import (
    casbin_rule,
    fact_tags,
    facts,
    path_tags,
    paths,
)
from app.errors import Conflict, EmbornalError, Forbidden, InvalidInput
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services import vector_index
from app.services.context import Context
from app.services.facts import write_vector
from app.services.validation import OWNER_KEY, check_content, check_tag, fold_path
from app.settings import LimitsSettings

EXPORT_TYPE = "embornal-export"
FORMAT_VERSION = 1
# The migration that writes a new memory's content; a memory holding exactly that is fresh.
SEED_MIGRATION = "migrations.versions.0001_initial"
# Later migrations that add default policy lines: a fresh memory holds theirs too.
POLICY_MIGRATIONS = ("migrations.versions.0002_tag_action",)
LOCAL_SEED_OWNER = "default"
SEED_PATHS = frozenset({"/", "/memory"})


def _require_admin(ctx: Context) -> None:
    if not ctx.access.is_admin:
        raise Forbidden("export and import move the whole memory: they need the admin role")


# --- records -----------------------------------------------------------------


@dataclass(frozen=True)
class PathRecord:
    line: int
    path: str
    created_at: float | None
    tags: dict[str, str]


@dataclass(frozen=True)
class FactRecord:
    line: int
    id: int
    path: str
    content: str
    owner: str
    tags: dict[str, str]
    supersedes_id: int | None
    deleted_at: float | None
    created_at: float
    last_recall_at: float | None
    recall_count: int
    stability_days: float
    embedding: bytes | None


@dataclass(frozen=True)
class PolicyRecord:
    line: int
    policy: PolicyLine


@dataclass
class ExportFile:
    """A whole export, every line checked."""

    embedding_width: int
    paths: list[PathRecord] = field(default_factory=list)
    facts: list[FactRecord] = field(default_factory=list)
    policies: list[PolicyRecord] = field(default_factory=list)


# --- export ------------------------------------------------------------------


def export_memory(
    conn: Connection, ctx: Context, *, with_embeddings: bool = False
) -> Iterator[dict[str, Any]]:
    """The whole memory as export records, streamed, ending with the end record.

    Everything: facts of every owner, deleted and superseded ones, every policy.
    Run it inside one read transaction so that the file is one consistent snapshot.
    """
    _require_admin(ctx)
    return _export(conn, ctx, with_embeddings)


def _export(conn: Connection, ctx: Context, with_embeddings: bool) -> Iterator[dict[str, Any]]:
    width = migrate.stored_width(conn)
    yield {"type": EXPORT_TYPE, "version": FORMAT_VERSION, "embedding_width": width}

    node_tags: dict[str, dict[str, str]] = {}
    for path, key, value in conn.execute(
        select(paths.c.path, path_tags.c.key, path_tags.c.value)
        .join(paths, paths.c.id == path_tags.c.path_id)
        .order_by(paths.c.path, path_tags.c.key)
    ):
        node_tags.setdefault(path, {})[key] = value
    path_count = 0
    # Sorted by path, a parent comes before its children (a prefix sorts first).
    for path, created_at in conn.execute(
        select(paths.c.path, paths.c.created_at).order_by(paths.c.path)
    ):
        path_count += 1
        yield {
            "type": "path",
            "path": path,
            "created_at": created_at,
            "tags": node_tags.get(path, {}),
        }

    # Facts and their tags are two cursors read side by side in fact id order, so an
    # export of any size holds one fact in memory at a time.
    tag_rows = iter(
        conn.execute(
            select(fact_tags.c.fact_id, fact_tags.c.key, fact_tags.c.value).order_by(
                fact_tags.c.fact_id, fact_tags.c.key
            )
        )
    )
    pending = next(tag_rows, None)
    fact_count = 0
    for row in conn.execute(
        select(facts, paths.c.path).join(paths, paths.c.id == facts.c.path_id).order_by(facts.c.id)
    ):
        own: dict[str, str] = {}
        while pending is not None and pending.fact_id <= row.id:
            if pending.fact_id == row.id:
                own[pending.key] = pending.value
            pending = next(tag_rows, None)
        record: dict[str, Any] = {
            "type": "fact",
            "id": row.id,
            "path": row.path,
            "content": row.content,
            "owner": row.owner,
            "tags": own,
            "supersedes_id": row.supersedes_id,
            "deleted_at": row.deleted_at,
            "created_at": row.created_at,
            "last_recall_at": row.last_recall_at,
            "recall_count": row.recall_count,
            "stability_days": row.stability_days,
        }
        if with_embeddings and row.embedding is not None:
            record["embedding"] = base64.b64encode(row.embedding).decode("ascii")
        fact_count += 1
        yield record

    lines = policy_service.list_policies(conn, ctx)
    for line in lines:
        yield {"type": "policy", "line": str(line)}
    yield {"type": "end", "paths": path_count, "facts": fact_count, "policies": len(lines)}


# JSON leaves these unescaped in strings, but str.splitlines() (and JavaScript before
# ES2019) take them for line breaks: escaped, one record is always one line.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def write_records(records: Iterable[Mapping[str, Any]], out: IO[str]) -> dict[str, int]:
    """Write records as JSON Lines; return the counts of the end record."""
    counts: dict[str, int] = {}
    for record in records:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        out.write(line.translate(_LINE_BREAKS))
        out.write("\n")
        if record.get("type") == "end":
            counts = {k: v for k, v in record.items() if k != "type"}
    return counts


# --- reading an export -------------------------------------------------------


def _line_error(number: int, detail: str) -> InvalidInput:
    message = f"line {number}: {detail}"
    return InvalidInput(message, errors=[{"loc": ["line", number], "msg": detail}])


def _fields(record: Mapping[str, Any], required: set[str], optional: set[str]) -> None:
    missing = sorted(required - record.keys())
    if missing:
        raise InvalidInput(f"missing field {missing[0]!r}")
    unknown = sorted(record.keys() - required - optional)
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}")


def _int(record: Mapping[str, Any], name: str, *, minimum: int) -> int:
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInput(f"{name} must be an integer of at least {minimum}")
    return value


def _time(record: Mapping[str, Any], name: str) -> float | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{name} must be UNIX seconds (a number) or null")
    return float(value)


def _str(record: Mapping[str, Any], name: str) -> str:
    value = record[name]
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    return value


def _tags(record: Mapping[str, Any]) -> dict[str, str]:
    raw = record.get("tags") or {}
    if not isinstance(raw, dict):
        raise InvalidInput("tags must be an object of key: value")
    tags: dict[str, str] = {}
    for raw_key, value in raw.items():
        key, value = check_tag(raw_key, value)
        if key in tags:
            raise InvalidInput(f"tag {key!r} is given twice")
        tags[key] = value
    return tags


def _header(record: Mapping[str, Any]) -> int:
    _fields(record, {"type", "version", "embedding_width"}, set())
    if record["version"] != FORMAT_VERSION:
        raise InvalidInput(
            f"export format version {record['version']!r} is not one this build reads "
            f"({FORMAT_VERSION})"
        )
    return _int(record, "embedding_width", minimum=1)


def _path_record(record: Mapping[str, Any], number: int) -> PathRecord:
    _fields(record, {"type", "path"}, {"created_at", "tags"})
    return PathRecord(
        line=number,
        path=fold_path(_str(record, "path")),
        created_at=_time(record, "created_at"),
        tags=_tags(record),
    )


FACT_REQUIRED = {"type", "id", "path", "content", "owner", "created_at"}
FACT_OPTIONAL = {
    "tags",
    "supersedes_id",
    "deleted_at",
    "last_recall_at",
    "recall_count",
    "stability_days",
    "embedding",
}


def _fact_record(
    record: Mapping[str, Any], number: int, width: int, limits: LimitsSettings
) -> FactRecord:
    _fields(record, FACT_REQUIRED, FACT_OPTIONAL)
    owner = _str(record, "owner")
    try:
        validate_subject(owner)
    except InvalidInput as exc:
        raise InvalidInput(f"owner {owner!r}: {exc.detail.removeprefix('subject ')}") from None
    tags = _tags(record)
    # The owner tag mirrors the owner column: the memory writes it, a file cannot differ.
    if tags.setdefault(OWNER_KEY, owner) != owner:
        raise InvalidInput(f"the owner tag {tags[OWNER_KEY]!r} is not the owner {owner!r}")
    if len(tags) - 1 > limits.tags_per_fact:
        raise InvalidInput(f"a fact carries at most {limits.tags_per_fact} tags besides owner")
    created_at = _time(record, "created_at")
    if created_at is None:
        raise InvalidInput("created_at must be UNIX seconds (a number)")
    supersedes = record.get("supersedes_id")
    stability = record.get("stability_days", 1.0)
    if isinstance(stability, bool) or not isinstance(stability, int | float):
        raise InvalidInput("stability_days must be a positive number")
    if not (math.isfinite(stability) and stability > 0):
        raise InvalidInput("stability_days must be a positive number")
    return FactRecord(
        line=number,
        id=_int(record, "id", minimum=1),
        path=fold_path(_str(record, "path")),
        content=check_content(_str(record, "content"), limits.content_chars),
        owner=owner,
        tags=tags,
        supersedes_id=None if supersedes is None else _int(record, "supersedes_id", minimum=1),
        deleted_at=_time(record, "deleted_at"),
        created_at=created_at,
        last_recall_at=_time(record, "last_recall_at"),
        recall_count=_int(record, "recall_count", minimum=0) if "recall_count" in record else 0,
        stability_days=float(stability),
        embedding=_embedding(record.get("embedding"), width),
    )


def _embedding(value: Any, width: int) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput("embedding must be base64 text")
    try:
        blob = base64.b64decode(value, validate=True)
    except binascii.Error:
        raise InvalidInput("embedding is not valid base64") from None
    if len(blob) != 4 * width:
        raise InvalidInput(
            f"embedding holds {len(blob) // 4} float32 values; the header says {width}"
        )
    return blob


def read_export(lines: Iterable[str], limits: LimitsSettings | None = None) -> ExportFile:
    """Parse and check a whole export; raise InvalidInput naming the first bad line."""
    limits = limits or LimitsSettings()
    data: ExportFile | None = None
    ended: dict[str, int] | None = None
    fact_ids: set[int] = set()
    superseded: dict[int, int] = {}  # superseded id -> line that supersedes it
    number = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            if ended is not None:
                raise InvalidInput("nothing may follow the end line")
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise InvalidInput("not a JSON object")
            kind = record.get("type")
            if data is None:
                if kind != EXPORT_TYPE:
                    raise InvalidInput(f'the first line must be the "{EXPORT_TYPE}" header')
                data = ExportFile(embedding_width=_header(record))
            elif kind == "path":
                data.paths.append(_path_record(record, number))
            elif kind == "fact":
                fact = _fact_record(record, number, data.embedding_width, limits)
                previous = data.facts[-1].id if data.facts else 0
                _check_chain(fact, previous, fact_ids, superseded)
                data.facts.append(fact)
            elif kind == "policy":
                _fields(record, {"type", "line"}, set())
                line = parse_policy_line(_str(record, "line"))
                data.policies.append(PolicyRecord(number, line))
            elif kind == "end":
                _fields(record, {"type", "paths", "facts", "policies"}, set())
                ended = {k: _int(record, k, minimum=0) for k in ("paths", "facts", "policies")}
            else:
                raise InvalidInput(f"unknown record type {kind!r}")
        except InvalidInput as exc:
            raise _line_error(number, exc.detail) from None
    if data is None:
        raise InvalidInput(f'the file is empty: it has no "{EXPORT_TYPE}" header')
    if ended is None:
        raise InvalidInput(
            f"the file stops at line {number} without its end line: it was cut short"
        )
    held = {"paths": len(data.paths), "facts": len(data.facts), "policies": len(data.policies)}
    if held != ended:
        raise InvalidInput(f"the end line counts {ended}, but the file holds {held}")
    return data


def _check_chain(
    fact: FactRecord, previous: int, ids: set[int], superseded: dict[int, int]
) -> None:
    """Ids increase, and a fact supersedes an earlier fact of the file, once."""
    if fact.id <= previous:
        raise InvalidInput(f"fact ids must increase: {fact.id} comes after {previous}")
    if fact.supersedes_id is not None:
        if fact.supersedes_id not in ids:
            raise InvalidInput(
                f"fact {fact.id} supersedes fact {fact.supersedes_id}, "
                "which no earlier line of the file holds"
            )
        if fact.supersedes_id in superseded:
            raise InvalidInput(
                f"fact {fact.supersedes_id} is superseded twice "
                f"(lines {superseded[fact.supersedes_id]} and {fact.line})"
            )
        superseded[fact.supersedes_id] = fact.line
    ids.add(fact.id)


# --- import ------------------------------------------------------------------


@dataclass
class ImportReport:
    mode: Literal["restore", "merge"]
    paths_added: int = 0
    path_tags_added: int = 0
    path_tags_kept: int = 0  # the memory had the key with another value: it kept its own
    facts_added: int = 0
    facts_skipped: int = 0  # already in the memory
    embeddings_written: int = 0
    facts_waiting_for_embedding: int = 0  # added without a vector that fits this memory
    policies_added: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def import_memory(conn: Connection, ctx: Context, data: ExportFile) -> ImportReport:
    """Load a checked export into the memory, in the caller's transaction.

    Restore into a fresh memory, merge into any other (see the module's docstring).
    Raises before the caller commits when the file cannot be applied whole.
    """
    _require_admin(ctx)
    restore = is_fresh(conn)
    report = ImportReport(mode="restore" if restore else "merge")
    if restore:
        _check_keeps_admin(data.policies, ctx.subject)
        _clear_fresh(conn)
    now = ctx.clock()
    paths_before = conn.execute(select(func.count()).select_from(paths)).scalar_one()
    _import_paths(conn, data.paths, now, report)
    _import_facts(conn, data, restore, report)
    if restore:
        backend(conn).after_explicit_ids(conn, facts)  # a restore kept the file's ids
    report.paths_added = (
        conn.execute(select(func.count()).select_from(paths)).scalar_one() - paths_before
    )
    for record in _in_adding_order(data.policies):
        with suppress(Conflict):  # already present: "added if absent"
            policy_service.add_policy(conn, ctx, str(record.policy))
            report.policies_added += 1
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
    seed = importlib.import_module(SEED_MIGRATION)
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
        )
        .join(paths, paths.c.id == facts.c.path_id)
        .order_by(facts.c.id)
    ).all()
    expected = [
        (number, "/memory", text, LOCAL_SEED_OWNER, None, None)
        for number, text in enumerate(seed.MEMORY_FACTS, start=1)
    ]
    if [tuple(row) for row in rows] != expected:
        return False
    rules = conn.execute(
        select(casbin_rule.c.ptype, *(casbin_rule.c[f"v{i}"] for i in range(6)))
    ).all()
    present = sorted(tuple(v for v in row if v) for row in rules)
    default_rules = list(seed.DEFAULT_POLICIES)
    default_rules += [importlib.import_module(m).TAG_POLICY for m in POLICY_MIGRATIONS]
    defaults = sorted(tuple(v for v in rule if v) for rule in default_rules)
    return present == defaults


def _check_keeps_admin(policies: list[PolicyRecord], subject: str) -> None:
    """A restore replaces the policies: refuse one that locks the importer out of them."""
    roles: dict[str, set[str]] = {}
    for record in policies:
        if record.policy.ptype == "g":
            member, role = record.policy.values
            roles.setdefault(member, set()).add(role)
    reached, frontier = set(), [subject, EVERYONE]
    while frontier:
        name = frontier.pop()
        if name not in reached:
            reached.add(name)
            frontier.extend(roles.get(name, ()))
    if ADMIN not in reached:
        raise InvalidInput(
            f"this memory is fresh, so the import would restore the file's policies, and "
            f"they leave {subject!r} without the {ADMIN!r} role; add the line "
            f'"g, {subject}, {ADMIN}" to the file'
        )


def _clear_fresh(conn: Connection) -> None:
    """Remove what the migration wrote so the file's facts keep their ids."""
    conn.execute(delete(fact_tags))
    # Codes, cells and log go, and a new generation makes running servers' in-memory
    # indexes reload whole (see app.services.vector_index).
    vector_index.clear_codes(conn)
    conn.execute(delete(facts))  # the FTS rows go with them (facts_fts_ad)
    conn.execute(delete(casbin_rule))


def _import_paths(
    conn: Connection, records: list[PathRecord], now: float, report: ImportReport
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
        present = path_service.own_path_tags(conn, node)
        for key, value in record.tags.items():
            if key not in present:
                conn.execute(insert(path_tags).values(path_id=node, key=key, value=value))
                report.path_tags_added += 1
            elif present[key] != value:
                report.path_tags_kept += 1


def _import_facts(conn: Connection, data: ExportFile, restore: bool, report: ImportReport) -> None:
    vectors_fit = data.embedding_width == migrate.stored_width(conn)
    held = None if restore else _HeldFacts(conn)
    new_ids: dict[int, int] = {}  # the file's id -> this memory's id
    path_ids: dict[str, int] = {}
    for record in data.facts:
        supersedes = new_ids[record.supersedes_id] if record.supersedes_id is not None else None
        existing = held.claim(record) if held is not None else None
        if existing is not None:
            new_ids[record.id] = existing
            report.facts_skipped += 1
            continue
        if supersedes is not None:
            taken = conn.execute(
                select(facts.c.id).where(facts.c.supersedes_id == supersedes)
            ).scalar()
            if taken is not None:
                raise Conflict(
                    f"line {record.line}: fact {record.id} supersedes fact "
                    f"{record.supersedes_id}, which this memory holds as #{supersedes} and "
                    f"has already superseded with #{taken}"
                )
        path_id = path_ids.get(record.path)
        if path_id is None:
            path_id = path_service.ensure_path(conn, record.path, record.created_at)
            path_ids[record.path] = path_id
        values: dict[str, Any] = {
            "path_id": path_id,
            "content": record.content,
            "owner": record.owner,
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


class _HeldFacts:
    """The facts the memory held before the import, found by (path, owner, created_at).

    Read in one pass up front. Looking each line up by path instead visits every
    fact of that path per line, and rows that carry an embedding are a page each:
    42 s for a re-import of 20k facts, against about one second this way. Loaded
    before anything is inserted, so two equal lines of one file (a batch may store
    the same text twice at one instant) stay two facts.
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

    def claim(self, record: FactRecord) -> int | None:
        """The id of an unclaimed held fact equal to `record`, now claimed; or None."""
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


# --- files -------------------------------------------------------------------


@contextmanager
def private_file(target: Path, *, force: bool = False) -> Iterator[IO[str]]:
    """A text file that appears at `target` whole or not at all, mode 0600.

    Written beside the target and renamed over it at the end, so a reader never
    sees half a file and a failure leaves whatever was there before.
    """
    tmp = _temp_beside(target, force=force)
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        _publish(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temp_beside(target: Path, *, force: bool) -> Path:
    if target.is_dir():
        raise InvalidInput(f"{target} is a directory; name a file")
    if target.exists() and not force:
        raise Conflict(f"{target} exists; pass --force to overwrite it")
    if not target.parent.is_dir():
        raise InvalidInput(f"the directory {target.parent} does not exist")
    try:
        # mkstemp creates the file with mode 0600: the copy is never readable by others.
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise EmbornalError(f"cannot write in {target.parent}: {exc.strerror}") from None
    os.close(fd)
    return Path(name)


def _publish(tmp: Path, target: Path) -> None:
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)
    with suppress(OSError):  # not every filesystem lets a directory be fsynced
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@dataclass(frozen=True)
class BackupReport:
    path: Path
    size_bytes: int
    facts: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _open_file_db(path: Path) -> Any:
    """A plain connection to a memory file, with sqlite-vec loaded as make_engine does."""
    conn = sqlean.connect(str(path), isolation_level=None)
    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)
    return conn


def check_copy(conn: Any) -> None:
    """Stop unless the copy is sound: SQLite's integrity check and FTS5's own.

    The rank=1 form compares the keyword index with the facts themselves; the plain
    form only checks an external-content index against itself.
    """
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
    if problems != ["ok"]:
        raise EmbornalError(f"the copy failed its integrity check: {'; '.join(problems[:5])}")
    try:
        conn.execute("INSERT INTO facts_fts(facts_fts, rank) VALUES('integrity-check', 1)")
    except sqlean.DatabaseError as exc:
        raise EmbornalError(f"the copy's keyword index failed its check: {exc}") from None


def _dump_with_server_tool(engine: Engine, target: Path, *, force: bool) -> BackupReport | None:
    """A database server's backup is its own dump tool's (PostgreSQL: pg_dump), run
    into a private temporary file and renamed over `target` once it succeeded."""
    tmp = _temp_beside(target, force=force)
    try:
        command = backend(engine).dump_command(engine, tmp)
        if command is None:
            tmp.unlink()
            return None
        argv, env = command
        started = time.perf_counter()
        done = subprocess.run(
            argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[0]
            raise EmbornalError(f"{Path(argv[0]).name} failed: {first}")
        with engine.connect() as conn:
            fact_count = conn.execute(select(func.count()).select_from(facts)).scalar_one()
        _publish(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return BackupReport(
        path=target,
        size_bytes=target.stat().st_size,
        facts=int(fact_count),
        seconds=time.perf_counter() - started,
    )


def backup_database(engine: Engine, target: Path, *, force: bool = False) -> BackupReport:
    """Copy the live memory to `target` with SQLite's online backup, then check the copy.

    The copy is taken in one step (pages=-1): a stepwise backup restarts whenever
    another connection writes, and might never finish under a busy server. One step
    reads one snapshot; in WAL mode writers go on meanwhile. The copy is switched to
    a rollback journal so that it is one self-contained file.
    """
    dumped = _dump_with_server_tool(engine, target, force=force)
    if dumped is not None:
        return dumped
    live = engine.url.database
    if live and live != ":memory:" and target.resolve() == Path(live).resolve():
        raise InvalidInput("the backup cannot overwrite the live memory itself")
    started = time.perf_counter()
    tmp = _temp_beside(target, force=force)
    try:
        copy = _open_file_db(tmp)
        try:
            source = engine.raw_connection()
            try:
                source.dbapi_connection.backup(copy, pages=-1)  # type: ignore[union-attr]
            finally:
                source.close()
            copy.execute("PRAGMA journal_mode=DELETE")
            check_copy(copy)
            fact_count = copy.execute("SELECT count(*) FROM facts").fetchone()[0]
        finally:
            copy.close()
        with tmp.open("rb+") as fh:
            os.fsync(fh.fileno())
        _publish(tmp, target)
    except BaseException:
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        raise
    return BackupReport(
        path=target,
        size_bytes=target.stat().st_size,
        facts=int(fact_count),
        seconds=time.perf_counter() - started,
    )
