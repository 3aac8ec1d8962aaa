"""Memory: the product's verbs, and the one place that owns their transactions.

Every front end (the HTTP routers, the `embornal` command, the MCP tools, the
tests) calls one method here per request. A method checks its input first, runs
the embedding model with no transaction open, and then opens exactly the
transaction its verb needs:

- a read snapshot for what only reads (browse, list, history, peek, whoami);
- a write transaction (BEGIN IMMEDIATE on SQLite: the one write lock) for what
  changes the memory, a recall included, held only for the statements that write.

The subject's Context (its compiled rules, limits and clock) is built inside
each transaction, from the policies that transaction sees: a policy change made
by any process is in force on the very next call. The `(conn, ctx, ...)`
service functions underneath never commit and never run the model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import numpy as np
from sqlalchemy import Connection, text

from app.acl.model import ACTIONS, ADMIN, METRICS
from app.auth.keys import key_source
from app.auth.subjects import validate_subject
from app.db import migrate
from app.db.backup import BackupReport, backup_database, download_copy, sweep_download_copies
from app.db.dialects import backend
from app.db.engine import close_engine, read_transaction, write_transaction
from app.embeddings import catalog
from app.embeddings.base import Embedder
from app.embeddings.catalog import NO_MODEL
from app.errors import Conflict, Forbidden, InvalidInput, Unavailable, invalid, is_public
from app.files import sweep_stale_temps
from app.rules import (
    LOCAL_SUBJECT,
    MAX_SIMILAR,
    ActivityAction,
    FrontEnd,
    ListSort,
    Mode,
    OnDuplicate,
    SearchSort,
)
from app.runtime import Runtime, open_engine, open_runtime
from app.services import activity as activity_service
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services import ranking, transfer
from app.services import search as search_service
from app.services import tokens as token_service
from app.services.activity import Entry, EntryPage
from app.services.activity import Filters as ActivityFilters
from app.services.context import Context
from app.services.embed_worker import EmbedWorker
from app.services.embedding import ProgressCallback, embed_for_store
from app.services.facts import CheckedFact, Fact, FactPage, NewFact, Similar, StoredFact
from app.services.paths import Child, Node
from app.services.search import SearchPage
from app.services.strength import SECONDS_PER_DAY
from app.services.tokens import TokenRecord
from app.services.validation import fold_path, parse_moment
from app.settings import LimitsSettings, Settings
from app.usecases.upkeep import UPKEEP_SECONDS, Upkeep

Clock = Callable[[], float]
log = logging.getLogger(__name__)

# The longest token a subject may issue for itself when auth.max_token_lifetime is off.
SELF_ISSUED_MAX = timedelta(days=30)


class _ModelSwitched(Exception):
    """Another process switched the memory's model since this one embedded."""


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just signed (shown once, never stored) and its record."""

    token: str
    record: TokenRecord
    # Whether any policy names its subject: a token no policy names works, but finds
    # only what everyone may (the CLI and the console warn).
    named: bool


def _many(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _days(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400} days"
    return f"{seconds} seconds"


@dataclass(frozen=True)
class SearchRequest:
    """What a search asks for; checked by `Memory.search` before the model runs."""

    q: str
    mode: Mode | None = None
    under: str | None = None
    tags: Sequence[str] = ()
    min_strength: float | None = None
    limit: int = 10
    sort: SearchSort = "relevance"
    peek: bool = False
    # RFC 3339 with an offset: search the memory as it stood then (never a recall).
    as_of: str | None = None


@dataclass(frozen=True, slots=True)
class Browse:
    """A node (app.services.paths.Node) with a page of the facts at it: `memory show`."""

    path: str
    tags: dict[str, str]
    effective_tags: dict[str, str]
    children: list[Child]
    fact_count: int
    subtree_fact_count: int
    facts: list[Fact]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Overview:
    """What the console's first page shows a subject: only what it may read.

    `database_bytes` is None unless the subject is an admin: the size of the file
    grows with facts the subject may not read."""

    facts: int
    pending_embeddings: int
    model: str | None
    model_loaded: bool
    width: int
    backend: str
    database_bytes: int | None
    recent: list[Fact]
    strongest: list[Fact]
    fading: list[Fact]


@dataclass(frozen=True, slots=True)
class FactView:
    """One fact read as a peek, its supersede chain (what the reader may read) and
    which changes the rules would allow the reader."""

    fact: Fact
    history: list[Fact]
    may_supersede: bool
    may_delete: bool


@dataclass(frozen=True, slots=True)
class SeenAs:
    """What `subject` may do at `path`, and the current facts it would see beneath it,
    decided by the same rules (compiled read fragment, enforcer) its requests meet."""

    subject: str
    path: str
    roles: list[str]
    may: dict[str, bool]  # read, write, delete, tag at the node, as the enforcer decides
    node_visible: bool
    facts: list[Fact]
    fact_count: int  # current facts it may read under `path`
    next_cursor: str | None


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str | None = None


@dataclass(frozen=True)
class ModelState:
    loaded: bool
    name: str | None = None  # the catalog name, loaded or not; None with no model configured
    reason: str | None = None  # why none is loaded


@dataclass(frozen=True)
class Readiness:
    """Ready or not, and why: asked with no token, so it holds no count (how many facts,
    vectors or waiting embeddings would tell anyone polling it when and how much others
    store; operators read those in /metrics)."""

    database: Check
    migrations: Check
    model: ModelState
    # The vector index: loaded into this process's memory (SQLite); in the database, with
    # the pgvector extension and its HNSW index (PostgreSQL).
    index: Check

    @property
    def ok(self) -> bool:
        return self.database.ok and self.migrations.ok and self.index.ok


@dataclass(frozen=True)
class Gauges:
    facts: int
    deleted: int
    pending_embeddings: int
    vector_index_size: int
    model_loaded: bool
    model_load_seconds: float | None


class Memory:
    """The verbs of the memory, each run as one subject.

    `clock` gives the time as UNIX seconds; tests pass one they move by hand.
    """

    def __init__(
        self, runtime: Runtime, *, clock: Clock | None = None, via: FrontEnd = "cli"
    ) -> None:
        self.runtime = runtime
        self._clock = clock or time.time
        # The front end this Memory serves: what the activity record names for a change.
        self.front_end: FrontEnd = via

    def via(self, front_end: FrontEnd) -> Memory:
        """This memory as another front end uses it (same runtime and clock): the REST
        app's Memory hands the console and MCP theirs, so each change is recorded with
        the front end it came through."""
        if front_end == self.front_end:
            return self
        return Memory(self.runtime, clock=self._clock, via=front_end)

    # --- transactions ----------------------------------------------------------

    def context(self, conn: Connection, subject: str) -> Context:
        """The subject as the rules of this transaction see it."""
        rt = self.runtime
        return Context(
            subject=subject,
            access=rt.access.for_subject(conn, subject),
            limits=rt.settings.limits,
            clock=self._clock,
        )

    @contextmanager
    def transaction(
        self, subject: str = LOCAL_SUBJECT, *, write: bool = False
    ) -> Iterator[tuple[Connection, Context]]:
        """A read snapshot (or, with `write`, a write transaction) and the subject's
        context in it; commits a write on success. Only this class and service-level
        tests open transactions."""
        opened = write_transaction if write else read_transaction
        with opened(self.runtime.engine) as conn:
            yield conn, self.context(conn, subject)

    def _model_still_named(self, conn: Connection) -> None:
        """_ModelSwitched unless the memory (as `conn` sees it) still names the loaded
        model: asked in a transaction the verb opens anyway, not in a read of its own;
        the verb then loads the new model (_model) and embeds again."""
        if not self.runtime.model_is_current(conn):
            raise _ModelSwitched

    def _model(self) -> Embedder | None:
        """The model to embed with now: the one the memory names, if another process
        switched it since (see Runtime.follow_model)."""
        self.runtime.follow_model()
        return self.runtime.embedder

    # --- facts -----------------------------------------------------------------

    def store(
        self, subject: str, item: NewFact, *, on_duplicate: OnDuplicate = "allow"
    ) -> StoredFact:
        """Store one fact (a correction when it names `supersedes_id`), with the facts it
        is near (`similar`); `on_duplicate="refuse"` makes a near one a 409 instead."""
        return self.store_batch(subject, [item], on_duplicate=on_duplicate)[0]

    def store_batch(
        self,
        subject: str,
        items: Sequence[NewFact],
        *,
        error_prefix: Sequence[Any] = (),
        on_duplicate: OnDuplicate = "allow",
    ) -> list[StoredFact]:
        """Store facts all or nothing: check, embed with no lock held, then write.

        Each stored fact comes back with up to 3 current facts its writer may read whose
        cosine to it reaches search.similar_threshold (`similar`), found with the vector
        the store made (no second embedding) before anything is written, so neither the
        batch's own facts nor the fact an item supersedes count. Without a vector (no
        model, or it failed) `similar_checked` is false. With `on_duplicate="refuse"` any
        similar fact is a Conflict naming it, and nothing is written.
        """
        checked = fact_service.validate_new_facts(
            items, self.runtime.settings.limits, error_prefix=error_prefix
        )
        rt = self.runtime
        # The model runs before the write lock: it must not hold up other writers. It is
        # the model loaded; whether the memory still names it is asked in the snapshots
        # below, as a search asks (no read of its own first), and after a switch by
        # another process the facts are embedded again with the new one, once.
        embedder = rt.embedder if rt.embedder is not None else self._model()
        try:
            return self._store_embedded(
                subject, checked, embedder, error_prefix, on_duplicate, check=True
            )
        except _ModelSwitched:
            return self._store_embedded(
                subject, checked, self._model(), error_prefix, on_duplicate, check=False
            )

    def _store_embedded(
        self,
        subject: str,
        checked: Sequence[CheckedFact],
        embedder: Embedder | None,
        error_prefix: Sequence[Any],
        on_duplicate: OnDuplicate,
        *,
        check: bool,
    ) -> list[StoredFact]:
        """store_batch's work with `embedder`; _ModelSwitched (nothing written) when
        `check` and the memory names another model."""
        vectors = embed_for_store(embedder, [item.content for item in checked])
        # None: nothing to look for (no threshold, or no vector to look with).
        threshold = self._similar_threshold(embedder) if any(vectors) else None
        near: list[list[Similar] | None] = [None] * len(checked)
        olds = [item.supersedes_id for item in checked]
        refuse = on_duplicate == "refuse"
        if threshold is not None and not refuse:
            # In a read snapshot, as a search ranks: a batch's searches (a few ms each)
            # must not hold the write lock. A near fact stored between the two
            # transactions is not seen: `similar` is a hint, not a uniqueness rule.
            with self.transaction(subject) as (conn, ctx):
                if check:
                    self._model_still_named(conn)
                near = self._similar_batch(conn, ctx, vectors, threshold, olds)
        with self.transaction(subject, write=True) as (conn, ctx):
            if check:
                self._model_still_named(conn)  # else the transaction rolls back: no write
            if threshold is not None and refuse:
                # A refusal is a promise: looked for under the write lock (SQLite's one
                # writer; on PostgreSQL the tree's lock, which every refusing store
                # takes), so that two stores of one text at once cannot both pass.
                backend(conn).lock_tree(conn)
                near = self._similar_batch(conn, ctx, vectors, threshold, olds)
            else:
                # Named only if still readable and current under this transaction's rules.
                hits = {s.id for found in near for s in found or ()}
                kept = search_service.still_visible(conn, ctx, hits) if hits else set()
                near = [
                    None if found is None else [s for s in found if s.id in kept] for found in near
                ]
            if refuse:
                _refuse_duplicates(near, error_prefix, many=len(checked) > 1)
            checked = self._keep_tags(conn, ctx, checked)
            facts = fact_service.store_facts(
                conn, ctx, checked, vectors=vectors, error_prefix=error_prefix
            )
            self._record_stores(conn, ctx, checked, facts)
            return [fact_service.stored(f, n) for f, n in zip(facts, near, strict=True)]

    def _keep_tags(
        self, conn: Connection, ctx: Context, items: Sequence[CheckedFact]
    ) -> list[CheckedFact]:
        """A supersede keeps the old fact's own tags unless the request gives tags (an
        empty mapping drops them): SPEC "Memory over time", decided here once for the
        REST API, MCP, the CLI and the console. A store of a new fact without tags has none."""
        olds = [i.supersedes_id for i in items if i.tags is None and i.supersedes_id is not None]
        kept = fact_service.kept_tags(conn, ctx, olds) if olds else {}
        return [
            replace(item, tags=kept.get(item.supersedes_id or 0, {})) if item.tags is None else item
            for item in items
        ]

    def _record_stores(
        self,
        conn: Connection,
        ctx: Context,
        items: Sequence[CheckedFact],
        stored: Sequence[Fact],
    ) -> None:
        kinds: tuple[tuple[ActivityAction, bool], ...] = (("store", False), ("supersede", True))
        for action, wanted in kinds:
            activity_service.record_many(
                conn,
                ctx,
                self.front_end,
                action,
                [
                    {"fact_id": fact.id, "path": fact.path, "supersedes_id": item.supersedes_id}
                    for item, fact in zip(items, stored, strict=True)
                    if (item.supersedes_id is not None) == wanted
                ],
            )

    def _similar_threshold(self, embedder: Embedder | None) -> float | None:
        threshold = self.runtime.settings.search.similar_threshold
        if threshold is None and embedder is not None:
            threshold = catalog.similar_cosine(embedder.name)
        return threshold

    def similar_to_new(self, subject: str, item: NewFact) -> list[Similar] | None:
        """What storing `item` would name as `similar`, storing nothing: the console
        shows it before the person commits. None when it cannot be looked for (no
        model, or the model failed)."""
        (checked,) = fact_service.validate_new_facts([item], self.runtime.settings.limits)
        embedder = self._model()
        (vector,) = embed_for_store(embedder, [checked.content])
        threshold = self._similar_threshold(embedder)
        if threshold is None or vector is None:
            return None
        with self.transaction(subject) as (conn, ctx):
            return self._similar(conn, ctx, vector, threshold, checked.supersedes_id)

    def retag(self, subject: str, fact_id: int, tags: Mapping[str, str]) -> StoredFact:
        """Change a fact's tags: a supersede by the same content with `tags` (a fact
        never changes; its history keeps the old tags)."""
        old = self.get(subject, fact_id, peek=True)
        return self.store(subject, NewFact(old.path, old.content, dict(tags), supersedes_id=old.id))

    def _similar(
        self,
        conn: Connection,
        ctx: Context,
        vector: bytes,
        threshold: float,
        supersedes_id: int | None,
    ) -> list[fact_service.Similar]:
        (found,) = self._similar_batch(conn, ctx, [vector], threshold, [supersedes_id])
        assert found is not None
        return found

    def _similar_batch(
        self,
        conn: Connection,
        ctx: Context,
        vectors: Sequence[bytes | None],
        threshold: float,
        supersedes: Sequence[int | None],
    ) -> list[list[fact_service.Similar] | None]:
        """The `similar` of each fact about to be stored with `vectors[i]` (superseding
        `supersedes[i]`, which is never named; None without a vector): one nearest-
        neighbour pass for the whole batch, the same facts and cosines as a search per
        fact, and the paths of every fact named read at once."""
        embedded = [n for n, vector in enumerate(vectors) if vector is not None]
        found = search_service.similar_to_many(
            conn,
            ctx,
            self.runtime.vector_index,
            [np.frombuffer(vectors[n], dtype="<f4") for n in embedded],  # type: ignore[arg-type]
            want=MAX_SIMILAR,
            min_cosine=threshold,
            excludes=[
                frozenset() if (old := supersedes[n]) is None else frozenset({old})
                for n in embedded
            ],
        )
        where = fact_service.similar_paths(conn, sorted({fid for hits in found for fid, _ in hits}))
        near: list[list[fact_service.Similar] | None] = [None] * len(vectors)
        for n, hits in zip(embedded, found, strict=True):
            near[n] = [fact_service.Similar(fid, where[fid], round(c, 6)) for fid, c in hits]
        return near

    def get(
        self,
        subject: str,
        fact_id: int,
        *,
        peek: bool = False,
        include_deleted: bool = False,
        as_of: str | None = None,
    ) -> Fact:
        """Hand one fact to its reader: a recall unless `peek` or `as_of` (the fact as it
        stood at that moment), which write nothing."""
        if as_of is not None:
            parse_moment(as_of)
        with self.transaction(subject, write=not peek and as_of is None) as (conn, ctx):
            return fact_service.get_fact(
                conn,
                ctx,
                fact_id,
                peek=peek,
                include_deleted=include_deleted,
                as_of=fact_service.moment(conn, ctx, as_of),
            )

    def recall(self, subject: str, fact_id: int) -> Fact:
        """An explicit recall: the fact's stability grows."""
        with self.transaction(subject, write=True) as (conn, ctx):
            return fact_service.recall_fact(conn, ctx, fact_id)

    def history(self, subject: str, fact_id: int, *, as_of: str | None = None) -> list[Fact]:
        """The supersede chain through a fact, oldest first (what the subject may read);
        with `as_of`, as it stood at that moment."""
        with self.transaction(subject) as (conn, ctx):
            return fact_service.history(
                conn, ctx, fact_id, as_of=fact_service.moment(conn, ctx, as_of)
            )

    def fact_to_delete(self, subject: str, fact_id: int) -> Fact:
        """The fact a delete would delete (a peek), or the delete's own refusal:
        for the console's confirmation step, which writes nothing."""
        with self.transaction(subject) as (conn, ctx):
            fact_service.check_delete(conn, ctx, fact_id)
            return fact_service.get_fact(conn, ctx, fact_id, peek=True)

    def delete(self, subject: str, fact_id: int) -> None:
        with self.transaction(subject, write=True) as (conn, ctx):
            fact_service.delete_fact(conn, ctx, fact_id)
            path = fact_service.similar_paths(conn, [fact_id])[fact_id]
            activity_service.record(conn, ctx, self.front_end, "delete", fact_id=fact_id, path=path)

    def list_facts(
        self,
        subject: str,
        *,
        under: str | None = None,
        at: str | None = None,
        tags: Sequence[str] | None = None,
        sort: ListSort = "created",
        limit: int = 50,
        cursor: str | None = None,
        as_of: str | None = None,
    ) -> FactPage:
        """Browse current facts (not a recall): of a subtree (`under`) or of one node (`at`);
        with `as_of` (RFC 3339), those current at that moment."""
        with self.transaction(subject) as (conn, ctx):
            return fact_service.list_facts(
                conn,
                ctx,
                under=under,
                at=at,
                tags=tags,
                sort=sort,
                limit=limit,
                cursor=cursor,
                as_of=fact_service.moment(conn, ctx, as_of),
            )

    # --- the tree --------------------------------------------------------------

    def describe_path(self, subject: str, path: str) -> Node:
        """A node one level deep: its tags, visible children and counts."""
        with self.transaction(subject) as (conn, ctx):
            return path_service.describe_path(conn, ctx, path)

    def browse(
        self,
        subject: str,
        path: str,
        *,
        sort: ListSort = "created",
        limit: int = 50,
        cursor: str | None = None,
        as_of: str | None = None,
    ) -> Browse:
        """A node with the facts that sit at it (not below), in one snapshot; `cursor`
        (a previous page's `next_cursor`) pages through those facts. With `as_of`, the
        facts at the node then (the node's tags, children and counts are today's)."""
        with self.transaction(subject) as (conn, ctx):
            node = path_service.describe_path(conn, ctx, path)
            page = fact_service.list_facts(
                conn,
                ctx,
                at=node.path,
                sort=sort,
                limit=limit,
                cursor=cursor,
                as_of=fact_service.moment(conn, ctx, as_of),
            )
        return Browse(
            **{f.name: getattr(node, f.name) for f in fields(Node)},
            facts=page.facts,
            next_cursor=page.next_cursor,
        )

    def tag_path(
        self,
        subject: str,
        path: str,
        *,
        set_tags: Mapping[str, str] | None = None,
        remove: Sequence[str] = (),
    ) -> Node:
        """Set and remove tags on a node in one transaction; returns the node."""
        with self.transaction(subject, write=True) as (conn, ctx):
            for key in remove:
                self._remove_path_tag(conn, ctx, path, key)
            node = path_service.set_path_tags(conn, ctx, path, dict(set_tags or {}))
            activity_service.record_many(
                conn,
                ctx,
                self.front_end,
                "tag_set",
                [{"path": node.path, "tag": f"{k}={v}"} for k, v in (set_tags or {}).items()],
            )
            return node

    def set_path_tags(self, subject: str, path: str, tags: Mapping[str, str]) -> Node:
        return self.tag_path(subject, path, set_tags=tags)

    def remove_path_tag(self, subject: str, path: str, key: str) -> None:
        with self.transaction(subject, write=True) as (conn, ctx):
            self._remove_path_tag(conn, ctx, path, key)

    def _remove_path_tag(self, conn: Connection, ctx: Context, path: str, key: str) -> None:
        path_service.remove_path_tag(conn, ctx, path, key)
        activity_service.record(
            conn, ctx, self.front_end, "tag_remove", path=fold_path(path), tag=key
        )

    # --- the console's views ---------------------------------------------------

    @property
    def backend(self) -> str:
        """The database the memory is in: `sqlite` or `postgresql`."""
        return backend(self.runtime.engine).name

    def now(self) -> float:
        """The memory's clock (UNIX seconds): what strengths are computed against."""
        return self._clock()

    def overview(self, subject: str, *, limit: int = 8) -> Overview:
        """Counts, the model, and recent, strongest and fading facts, in one snapshot."""
        rt = self.runtime
        with self.transaction(subject) as (conn, ctx):
            standing = fact_service.standing(conn, ctx, limit=limit)
            pending = fact_service.pending_visible(conn, ctx)
            recent = fact_service.list_facts(conn, ctx, limit=limit).facts
            is_admin = ctx.access.is_admin
        model = rt.model
        return Overview(
            facts=standing.count,
            pending_embeddings=pending,
            model=None if model.name == NO_MODEL else model.name,
            model_loaded=model.embedder is not None,
            width=rt.settings.embedding.width,
            backend=self.backend,
            database_bytes=backend(rt.engine).database_bytes(rt.engine) if is_admin else None,
            recent=recent,
            strongest=standing.strongest,
            fading=standing.fading,
        )

    def fact_view(self, subject: str, fact_id: int) -> FactView:
        """A fact for the console: a peek (never a recall), deleted ones included."""
        with self.transaction(subject) as (conn, ctx):
            fact = fact_service.get_fact(conn, ctx, fact_id, peek=True, include_deleted=True)
            chain = fact_service.history(conn, ctx, fact_id)
            rights = fact_service.fact_rights(conn, ctx, fact_id)
        live = fact.deleted_at is None
        return FactView(
            fact,
            chain,
            may_supersede=live and not fact.superseded and rights["supersede"],
            may_delete=live and rights["delete"],
        )

    def tag_origins(self, subject: str, path: str) -> dict[str, str]:
        """Where each effective tag of a node comes from: the node or an ancestor."""
        with self.transaction(subject) as (conn, ctx):
            return path_service.tag_origins(conn, ctx, path)

    def may_tag(self, subject: str, path: str) -> bool:
        """Whether the subject may set or remove path tags at `path`."""
        with self.transaction(subject) as (conn, ctx):
            return path_service.may_tag(conn, ctx, path)

    def see_as(
        self, admin: str, subject: str, path: str, *, limit: int = 50, cursor: str | None = None
    ) -> SeenAs:
        """As `admin` (role admin), what `subject` may do at `path` and what it reads there."""
        self.require_admin(admin, "seeing as another subject needs the admin role")
        validate_subject(subject)  # a name no token could carry is nobody to see as
        folded = fold_path(path)
        with self.transaction(subject) as (conn, ctx):
            node = path_service.path_resource(conn, folded)
            may = {action: ctx.access.can(action, node) for action in ACTIONS}
            node_visible = folded in path_service.visible_nodes(conn, ctx, [folded])
            page = fact_service.list_facts(conn, ctx, under=folded, limit=limit, cursor=cursor)
            count = fact_service.count_under(conn, ctx, folded)
            roles = ctx.access.roles
        return SeenAs(
            subject, folded, roles, may, node_visible, page.facts, count, page.next_cursor
        )

    # --- tokens and sign-in ------------------------------------------------------

    def issue_token(
        self, issuer: str, subject: str, lifetime: timedelta, *, label: str | None = None
    ) -> IssuedToken:
        """As `issuer`, a token for `subject` signed with the local key, recorded.

        An admin issues for any subject; any other subject for itself only, for at most
        auth.max_token_lifetime (SELF_ISSUED_MAX without one), so a stolen token cannot
        mint a longer-lived one than the owner allows.
        """
        with self.transaction(issuer, write=True) as (conn, ctx):
            if not ctx.access.is_admin:
                if subject != issuer:
                    raise Forbidden("issuing a token for another subject needs the admin role")
                cap = self.runtime.settings.auth.max_token_lifetime
                most = timedelta(seconds=cap) if cap is not None else SELF_ISSUED_MAX
                if lifetime > most:
                    raise invalid(
                        "expires_in",
                        f"a token you issue for yourself lives at most {_days(most)}; "
                        "an admin can issue a longer one",
                    )
            return self._issue(conn, ctx, subject, lifetime, label)

    def sign_token(
        self, subject: str, lifetime: timedelta, *, label: str | None = None
    ) -> IssuedToken:
        """A token for `subject` signed with the local key, recorded as issued by the
        owner at this machine (`token issue`). The command line works on the database
        file, whatever its policies say: no admin check."""
        with self.transaction(LOCAL_SUBJECT, write=True) as (conn, ctx):
            return self._issue(conn, ctx, subject, lifetime, label)

    def _issue(
        self,
        conn: Connection,
        ctx: Context,
        subject: str,
        lifetime: timedelta,
        label: str | None,
    ) -> IssuedToken:
        settings = self.runtime.settings
        if key_source(settings) != "secret":
            raise Conflict(
                "this memory signs no tokens: they come from your identity provider "
                "(auth.jwks_url or auth.public_key_file)"
            )
        validate_subject(subject)
        # A role's name is refused: the server would refuse such a token (401).
        policy_service.refuse_role_name(conn, subject)
        if label is not None:
            label = token_service.check_label(label)
        # PyJWT and cryptography (~70 ms) are imported by the commands that sign.
        from app.auth.tokens import issue_token, new_jti

        # The wall clock, not the memory's: a token's times are checked against it.
        now = datetime.fromtimestamp(int(time.time()), UTC)
        jti = new_jti()
        token = issue_token(settings, subject, lifetime, now=now, jti=jti)
        record = token_service.record_issued(
            conn,
            ctx,
            jti=jti,
            subject=subject,
            label=label,
            issued_at=now.timestamp(),
            expires_at=(now + lifetime).timestamp(),
        )
        activity_service.record(
            conn, ctx, self.front_end, "token_issue", jti=jti, note=f"for {subject}"
        )
        named = policy_service.is_named_by_a_policy(conn, subject)
        return IssuedToken(token, record, named)

    def list_tokens(self, subject: str, *, include_expired: bool = False) -> list[TokenRecord]:
        """The subject's own tokens (every token for an admin), newest first."""
        with self.transaction(subject) as (conn, ctx):
            return token_service.list_tokens(
                conn, ctx, now=time.time(), include_expired=include_expired
            )

    def token_to_revoke(self, subject: str, jti: str) -> TokenRecord | None:
        """What revoking `jti` would revoke (the console's confirmation): its record;
        None for an admin when this memory did not issue it; NotFound for anyone else
        when it is not the subject's own."""
        with self.transaction(subject) as (conn, ctx):
            return token_service.revocable(conn, ctx, jti, now=time.time())

    def revoke_token(self, subject: str, jti: str) -> TokenRecord:
        """Revoke a token: every server refuses it on its next request (within
        auth.revocation_check_seconds where that is above 0; this one at once)."""
        with self.transaction(subject, write=True) as (conn, ctx):
            revoked = token_service.revoke(conn, ctx, jti, now=time.time())
            whose = f"of {revoked.subject}" if revoked.subject else "not issued here"
            activity_service.record(
                conn, ctx, self.front_end, "token_revoke", jti=revoked.jti, note=whose
            )
        self.runtime.revocations.invalidate()
        return revoked

    def token_revoked(self, jti: str) -> bool:
        """Whether `jti` is revoked, from this process's list (read again when older
        than auth.revocation_check_seconds): the verifier asks on every request."""
        revocations = self.runtime.revocations
        if revocations.stale():
            with read_transaction(self.runtime.engine) as conn:
                revocations.refresh(
                    conn,
                    now=time.time(),
                    leeway=self.runtime.settings.auth.leeway_seconds,
                )
        return jti in revocations

    def signin_code(self, subject: str = LOCAL_SUBJECT) -> tuple[str, float]:
        """A one-time code for a console sign-in link as `subject` (`embornal ui`): valid
        for five minutes and one use; the code and when it stops working."""
        validate_subject(subject)
        if key_source(self.runtime.settings) != "secret":
            # The code is exchanged for a token this memory signs: it signs none here.
            raise Conflict(
                "this memory's tokens come from your identity provider: sign in at "
                "/ui/login with one of its tokens"
            )
        with self.transaction(subject, write=True) as (conn, _ctx):
            return token_service.create_signin_code(conn, subject, time.time())

    def redeem_signin_code(self, code: str, lifetime: timedelta) -> tuple[str, str, float]:
        """Use up a sign-in code: its subject, a token for the session (recorded, so a
        revocation ends the session) and when that expires. Unauthorized for a code
        that is unknown, used or expired."""
        with write_transaction(self.runtime.engine) as conn:
            subject = token_service.redeem_signin_code(conn, code, time.time())
            ctx = self.context(conn, subject)
            issued = self._issue(conn, ctx, subject, lifetime, "console sign-in link")
        assert issued.record.expires_at is not None
        return subject, issued.token, issued.record.expires_at.timestamp()

    # --- the activity record -------------------------------------------------------

    def activity(
        self,
        subject: str,
        filters: ActivityFilters | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> EntryPage:
        """Who changed what, newest first: everything for an admin; a subject's own
        changes otherwise, and none about a fact it cannot read."""
        with self.transaction(subject) as (conn, ctx):
            return activity_service.list_entries(
                conn, ctx, filters or ActivityFilters(), limit=limit, cursor=cursor
            )

    def prune(self) -> dict[str, int]:
        """Forget activity older than activity.keep_days and tokens expired as long ago,
        each batch in a short write transaction of its own. Never with keep_days null."""
        keep = self.runtime.settings.activity.keep_days
        now = self._clock()
        before = None if keep is None else now - keep * SECONDS_PER_DAY
        entries = 0
        while before is not None:
            with write_transaction(self.runtime.engine) as conn:
                gone = activity_service.prune(conn, before)
            entries += gone
            if gone < activity_service.PRUNE_BATCH:
                break
        wall = time.time()
        with write_transaction(self.runtime.engine) as conn:
            tokens = token_service.prune(
                conn,
                now=wall,
                expired_before=None if keep is None else wall - keep * SECONDS_PER_DAY,
            )
        return {"activity": entries, "tokens": tokens}

    def start_upkeep(self, *, every_seconds: float = UPKEEP_SECONDS) -> Upkeep:
        """A server's background pruning (see `prune`), started: soon, then hourly."""
        upkeep = Upkeep(self.prune, every_seconds=every_seconds)
        upkeep.start()
        return upkeep

    # --- search ----------------------------------------------------------------

    def search(self, subject: str, request: SearchRequest) -> SearchPage:
        """Search: check and embed first (no transaction), rank in a read snapshot,
        then hand out the page, counting a recall of each result unless `peek`.

        The write lock is taken only for the recalls; a peek takes none, nor does a
        search `as_of` a moment (the memory as it stood then; never a recall).
        """
        rt = self.runtime
        # Checked first: a bad or out-of-range moment costs no model time.
        at = self._moment(subject, request.as_of)
        # The model loaded here, embedding before any transaction; whether another
        # process switched the memory to another model since is asked in the ranking's
        # snapshot (one read there, not a transaction of its own). A keyword search
        # runs no model and asks nothing.
        uses_model = request.mode != "keyword"
        # With no model loaded, look for one first: prepare() would refuse without it.
        embedder = self._model() if uses_model and rt.embedder is None else rt.embedder
        checked = replace(self._prepare_search(request, embedder, embed_now=False), as_of=at)
        try:
            ranking = self._rank(subject, checked, embedder, uses_model)
        except _ModelSwitched:
            query = replace(self._prepare_search(request, self._model()), as_of=at)
            with self.transaction(subject) as (conn, ctx):
                ranking = search_service.rank(conn, ctx, query, rt.vector_index)
        recalls = not request.peek and at is None
        with self.transaction(subject, write=recalls) as (conn, ctx):
            return search_service.deliver(conn, ctx, ranking, peek=request.peek)

    def hybrid_candidates(self, subject: str, request: SearchRequest) -> search_service.Candidates:
        """The candidates a hybrid search of `request` weighs, with their features: what
        `python -m bench.fit_ranking` fits the ranking on. Reads only; never a recall."""
        embedder = self.runtime.embedder
        checked = replace(request, mode="hybrid")
        query = self._prepare_search(checked, embedder)
        with self.transaction(subject) as (conn, ctx):
            keyword = search_service.keyword_half(conn, ctx, query)
            semantic = search_service.semantic_half(conn, ctx, query, self.runtime.vector_index)
        return search_service.candidates(query, keyword, semantic)

    def _moment(self, subject: str, as_of: str | None) -> float | None:
        """`as_of` checked against the memory (app.services.facts.moment), or None."""
        if as_of is None:
            return None
        parse_moment(as_of)  # bad text is refused before any transaction opens
        with self.transaction(subject) as (conn, ctx):
            return fact_service.moment(conn, ctx, as_of)

    def _rank(
        self,
        subject: str,
        checked: search_service.Query,
        embedder: Embedder | None,
        uses_model: bool,
    ) -> search_service.Ranking:
        """Embed and rank `checked`; _ModelSwitched when another process switched the
        model since (nothing is ranked with the old model's vector).

        The model runs first, with no transaction open; then one read snapshot ranks
        (both halves of a hybrid search in it), and hybrid's scoring reads nothing.
        Running the keyword half on a second thread while the model embedded was no
        faster on two cores: the model's threads slowed twofold beside it (bench.
        search_profile, bench.http_pair_bench). Where both halves run in the database
        server (PostgreSQL), they run at once instead (_halves_at_once). deliver()
        checks every id again.
        """
        rt = self.runtime
        query = search_service.embed(checked, embedder, rt.query_cache)
        if query.mode == "hybrid" and backend(rt.engine).vectors.in_database:
            return self._halves_at_once(subject, query, uses_model)
        with self.transaction(subject) as (conn, ctx):
            if uses_model:
                self._model_still_named(conn)
            if query.mode != "hybrid":
                return search_service.rank(conn, ctx, query, rt.vector_index)
            keyword = search_service.keyword_half(conn, ctx, query)
            semantic = search_service.semantic_half(conn, ctx, query, rt.vector_index)
        return search_service.score(query, keyword, semantic)

    def _halves_at_once(
        self, subject: str, query: search_service.Query, uses_model: bool
    ) -> search_service.Ranking:
        """Hybrid's halves side by side, each in a read snapshot and on a connection of
        its own: on PostgreSQL both are work of the server (its walks, its HNSW graph),
        which then runs them in two processes while this one waits. At 100k facts, in
        the process with the query's embedding cached: 41.0 -> 31.1 ms p50, the same
        pages (docs/postgresql.md). On SQLite the halves run in this process, and side
        by side they were slower (docs/benchmarks.md, 2026-12-06).

        This thread waits for the keyword half only after its own snapshot has ended,
        so a request never holds a connection while it waits for another."""
        rt = self.runtime

        def keyword_half() -> search_service.Keyword:
            with self.transaction(subject) as (conn, ctx):
                return search_service.keyword_half(conn, ctx, query)

        keyword = rt.side_work().submit(keyword_half)
        try:
            with self.transaction(subject) as (conn, ctx):
                if uses_model:
                    self._model_still_named(conn)
                semantic = search_service.semantic_half(conn, ctx, query, rt.vector_index)
        except BaseException:
            wait([keyword])  # its snapshot ends before this request does
            raise
        return search_service.score(query, keyword.result(), semantic)

    def _prepare_search(
        self, request: SearchRequest, embedder: Embedder | None, *, embed_now: bool = True
    ) -> search_service.Query:
        rt = self.runtime
        # Semantic search's no-match floor (hybrid weighs every candidate instead).
        floor = rt.settings.search.min_cosine
        if floor is None:
            semantic = request.mode == "semantic"
            floor = ranking.cosine_floor(embedder.name) if semantic and embedder else -1.0
        return search_service.prepare(
            q=request.q,
            embedder=embedder,
            model_problem=rt.model_problem,
            mode=request.mode,
            limit=request.limit,
            under=request.under,
            tags=request.tags,
            min_strength=request.min_strength,
            sort=request.sort,
            cache=rt.query_cache,
            min_cosine=floor,
            now=self._clock(),
            embed_now=embed_now,
        )

    # --- who and what ----------------------------------------------------------

    def whoami(self, subject: str) -> dict[str, Any]:
        with self.transaction(subject) as (_conn, ctx):
            return {
                "subject": ctx.subject,
                "roles": ctx.access.roles,
                "permissions": ctx.access.permissions(),
            }

    def refuse_role_name(self, name: str) -> None:
        """InvalidInput when `name` could not be a token's subject: not a valid subject
        name (the verifier's rule), or a role's."""
        validate_subject(name)
        with read_transaction(self.runtime.engine) as conn:
            policy_service.refuse_role_name(conn, name)

    def require_admin(self, subject: str, message: str) -> None:
        """Forbidden unless the subject holds the admin role (for operators' routes)."""
        with self.transaction(subject) as (_conn, ctx):
            if not ctx.access.is_admin:
                raise Forbidden(message)

    def require_metrics(self, subject: str) -> None:
        """Forbidden unless the subject may read the operators' metrics: the role
        `metrics` (which grants nothing else) or `admin`. The gauges count every fact,
        whoever may read it."""
        with self.transaction(subject) as (_conn, ctx):
            if not (ctx.access.is_admin or ctx.access.holds(METRICS)):
                raise Forbidden(f"metrics need the role {METRICS!r} (or {ADMIN!r})")

    # The policy verbs take `subject` (REST, MCP, the console: it must hold the admin
    # role) or `owner=True`: the command line on the database file, which no policy
    # binds. Whoever can write the file owns the memory; this is the way back for an
    # owner who locked themself out, so the owner's changes skip the admin check (their
    # context only names who made them in the activity record).

    def list_policies(self, subject: str, *, owner: bool = False) -> list[dict[str, object]]:
        if owner:
            with read_transaction(self.runtime.engine) as conn:
                return [line.as_dict() for line in policy_service.list_policies(conn, None)]
        with self.transaction(subject) as (conn, ctx):
            return [line.as_dict() for line in policy_service.list_policies(conn, ctx)]

    def add_policy(self, subject: str, line: str, *, owner: bool = False) -> dict[str, object]:
        # The context is made before the change: its rules are cached.
        with self.transaction(subject, write=True) as (conn, ctx):
            added = policy_service.add_policy(conn, None if owner else ctx, line).as_dict()
            self._record_policy(conn, ctx, "policy_add", added)
            return added

    def policy_to_remove(self, subject: str, line: str) -> dict[str, object]:
        """The line a removal would remove, or its refusal (the console's confirmation)."""
        with self.transaction(subject) as (conn, ctx):
            return policy_service.find_policy(conn, ctx, line).as_dict()

    def remove_policy(self, subject: str, line: str, *, owner: bool = False) -> dict[str, object]:
        """Remove a line; Conflict if it is the last that gives anyone the admin role."""
        with self.transaction(subject, write=True) as (conn, ctx):
            removed = policy_service.remove_policy(conn, None if owner else ctx, line).as_dict()
            self._record_policy(conn, ctx, "policy_remove", removed)
            return removed

    def _record_policy(
        self, conn: Connection, by: Context, action: ActivityAction, line: dict[str, object]
    ) -> None:
        """The activity entry of a policy change (the file's owner's too)."""
        activity_service.record(conn, by, self.front_end, action, policy=str(line["line"]))

    def start_embedding_worker(self) -> EmbedWorker | None:
        """A server's background embedder of the pending queue, started; None without a
        model. It embeds with the model the memory names at each pass (see _model)."""
        if self._model() is None:
            return None
        worker = EmbedWorker(self.runtime.engine, self._model)
        worker.start()
        return worker

    # --- the service itself ------------------------------------------------------

    def recorded_model(self) -> str | None:
        """The model the memory's vectors come from, as meta names it (None before any)."""
        with read_transaction(self.runtime.engine) as conn:
            return migrate.stored_model(conn)

    def schema_revisions(self) -> tuple[str | None, str | None]:
        """(the schema revision the memory was at when opened, None for a new memory;
        the head revision it is at now)."""
        return self.runtime.found_at_revision, migrate.head_revision()

    def readiness(self) -> Readiness:
        """Database reachable, schema at head, vectors in place, and which model is
        loaded (no subject).

        Without a model the memory is still ready: keyword search and stores work,
        and facts wait for one. Without its vectors' table (a PostgreSQL restore that
        left it or pgvector out) it is not, whatever its revision says: every store with
        a model and every search by meaning needs the table.
        """
        rt = self.runtime
        database = Check(False, "the database cannot be reached")
        migrations = Check(False, "not checked: no database")
        missing = None
        try:
            with read_transaction(rt.engine) as conn:
                conn.execute(text("SELECT 1"))
                database = Check(True)
                current, head = migrate.current_revision(conn), migrate.head_revision()
                if current == head:
                    missing = backend(conn).vectors.missing(conn)
            if current == head:
                migrations = Check(True, f"at head {head}")
                rt.follow_model()
            else:
                migrations = Check(False, f"at {current}, head is {head}")
        except Exception as exc:
            if is_public(exc):
                # A fault (gone, busy, timed out, disk full): its detail says which, and
                # app.db.faults logged the driver's line. Readiness follows the database
                # back without a restart: the next check draws a fresh connection.
                database = Check(False, exc.detail)
            else:
                # The reason goes to the log: it may name the file or hold SQL.
                log.exception("readiness check failed")
        model = rt.model
        named = None if model.name == NO_MODEL else model.name
        if missing is not None and not missing.usable:
            index = Check(False, missing.detail)
        elif not rt.vector_index.ready.is_set():
            index = Check(False, "the vector index is not loaded (see the log)")
        else:
            index = Check(True, missing.detail if missing is not None else "loaded")
        return Readiness(
            database,
            migrations,
            ModelState(
                model.embedder is not None,
                named,
                None if model.embedder is not None else rt.problem_of(model) or "no model loaded",
            ),
            index,
        )

    def gauges(self) -> Gauges:
        """Counts over the whole memory for operators' metrics (whoever wrote them)."""
        rt = self.runtime
        with read_transaction(rt.engine) as conn:
            counts = fact_service.totals(conn)
        return Gauges(
            facts=counts["facts"],
            deleted=counts["deleted"],
            pending_embeddings=counts["pending_embeddings"],
            vector_index_size=len(rt.vector_index),
            model_loaded=rt.embedder is not None,
            model_load_seconds=rt.model.load_seconds,
        )

    # --- moving and maintaining the memory -------------------------------------

    def export(
        self,
        subject: str,
        out: IO[str],
        *,
        with_embeddings: bool = False,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, int]:
        """Write the whole memory to `out` as JSON Lines, from one read snapshot (admin).

        `on_progress(done, total)` counts the facts written."""
        with self.transaction(subject) as (conn, ctx):
            records = transfer.export_memory(conn, ctx, with_embeddings=with_embeddings)
            if on_progress is not None:
                records = _counting_facts(records, fact_service.totals(conn)["facts"], on_progress)
            return transfer.write_records(records, out)

    def import_lines(
        self,
        subject: str,
        lines: Iterable[str],
        *,
        with_policies: bool = False,
        on_progress: ProgressCallback | None = None,
    ) -> transfer.ImportReport:
        """Check every line of an export first, then load it in one write transaction;
        its policy lines and path tags only `with_policies` (the report names each).

        `on_progress(done, total)` counts the facts loaded."""
        with self.transaction(subject) as (conn, _ctx):
            roles = policy_service.role_names(conn)
        data = transfer.read_export(
            lines, self.runtime.settings.limits, now=self._clock(), roles=roles
        )
        with self.transaction(subject, write=True) as (conn, ctx):
            report = transfer.import_memory(
                conn, ctx, data, with_policies=with_policies, on_progress=on_progress
            )
            note = (
                f"{_many(report.facts_added, 'fact')}, {_many(report.paths_added, 'path')}, "
                f"{_many(len(report.path_tags_added), 'path tag')} and "
                f"{_many(len(report.policies_added), 'policy', 'policies')} added"
            )
            action: ActivityAction = "restore" if report.mode == "restore" else "import"
            activity_service.record(conn, ctx, self.front_end, action, note=note)
            return report

    def backup_as(self, subject: str, target: Path) -> BackupReport:
        """`backup` for a subject in the admin role (the copy holds the whole memory)."""
        self.require_admin(subject, "a backup copies the whole memory: it needs the admin role")
        return self.backup(target)

    @contextmanager
    def backup_to_send(self, subject: str) -> Iterator[Path]:
        """A backup that is sent, not kept (the console's download; admin): made in the
        memory's own private folder under a hidden, locked name (app.db.backup's
        download_copy), gone when the block ends. A process killed meanwhile leaves it
        until the next such backup, or the next server's start (`sweep_killed_sends`)."""
        self.require_admin(subject, "a backup copies the whole memory: it needs the admin role")
        with download_copy(self.runtime.engine, _send_folder(self.runtime.settings)) as copy:
            yield copy

    def sweep_killed_sends(self) -> None:
        """Remove what a `backup_to_send` whose process was killed left: at a server's start."""
        sweep_download_copies(_send_folder(self.runtime.settings))

    def backup(self, target: Path, *, force: bool = False) -> BackupReport:
        """A consistent copy of the live memory: SQLite's online backup of the file, or
        on PostgreSQL a pg_dump archive (custom format, for pg_restore)."""
        return backup_database(self.runtime.engine, target, force=force)

    def reindex(
        self,
        *,
        rebuild: bool = False,
        batch_size: int | None = None,
        on_batch: ProgressCallback | None = None,
    ) -> int:
        """Embed the facts that wait for the model, in batches each committed alone.

        With `rebuild`, first move the memory to the loaded model's width: checked
        before anything changes, so a refused rebuild leaves the memory as it was. The
        rebuild itself is one transaction; an interrupted embedding pass resumes.
        """
        rt = self.runtime
        embedder = rt.embedder  # the model this process was opened with, not meta's
        if embedder is None:
            raise Unavailable(f"no model to embed with: {rt.model_problem or 'none is loaded'}")
        configured = rt.settings.embedding.width
        if embedder.width != configured:
            raise InvalidInput(
                f"the model {embedder.name} gives {embedder.width}-d vectors but config.yaml "
                f"says embedding.width: {configured}; set the width to {embedder.width} first"
            )
        if rebuild:
            with write_transaction(rt.engine) as conn:
                embedding_service.rebuild_vectors(conn, configured)
                # Running servers see this on their next request and load the model too.
                migrate.record_model(conn, embedder.name)
        rt.verify_width()
        return embedding_service.reindex(
            rt.engine,
            embedder,
            batch_size=batch_size or rt.settings.embedding.batch_size,
            on_batch=on_batch,
        )


def _refuse_duplicates(
    near: Sequence[list[fact_service.Similar] | None], error_prefix: Sequence[Any], *, many: bool
) -> None:
    """Conflict naming the first similar fact, if any item has one (nothing is written)."""
    for index, hits in enumerate(near):
        if hits:
            hit = hits[0]
            which = f"fact {index} of the batch" if many else "this fact"
            # `similar` as a 201 gives it (and, in a batch, which item), for an agent that
            # supersedes without parsing the sentence.
            data: dict[str, Any] = {"similar": [asdict(h) for h in hits]}
            if many:
                data["index"] = index
            raise Conflict(
                f"{which} is similar to fact {hit.id} at {hit.path} (cosine {hit.cosine:.2f}): "
                f"store it with supersedes_id {hit.id} to correct that fact, or without "
                "on_duplicate=refuse to keep both",
                extensions=data,
            )


def _counting_facts(
    records: Iterator[transfer.Record], total: int, on_progress: ProgressCallback
) -> Iterator[transfer.Record]:
    done = 0
    on_progress(done, total)
    for record in records:
        yield record
        if isinstance(record, transfer.FactRecord):
            done += 1
            if done % 256 == 0 or done == total:
                on_progress(done, total)


def _send_folder(settings: Settings) -> Path:
    """Where a backup that is sent is made: beside memory.db, in the folder whose mode
    (0700) and backups its owner manages, not /tmp; on PostgreSQL, the data directory."""
    if settings.database.url is None:
        return settings.database_path.parent
    return settings.dirs.data_dir


def backup_file(settings: Settings, target: Path, *, force: bool = False) -> BackupReport:
    """Back up the memory file as it is, without opening it as a Memory: a backup
    must not migrate (or otherwise change) what it copies."""
    if settings.database.url is None and not settings.database_path.is_file():
        raise InvalidInput(f"there is no memory at {settings.database_path}")
    if target.is_dir():
        # A folder (the container's /backups mount): a new file in it, named by the time.
        kind = "dump" if settings.database.url is not None else "db"
        # Each backup there has a name of its own, so none is the same target as one
        # killed before it: the temporary files of every name made so are swept.
        sweep_stale_temps(target, f"memory-????????T??????Z.{kind}")
        target = target / f"memory-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.{kind}"
    engine = open_engine(settings)
    try:
        return backup_database(engine, target, force=force)
    finally:
        close_engine(engine)


def moment_of(as_of: str | None) -> datetime | None:
    """An `as_of` argument as the moment it names, in UTC (InvalidInput if it names none):
    for a front end that echoes the moment it answered for."""
    return parse_moment(as_of) if as_of is not None else None


def check_facts(items: Sequence[NewFact], limits: LimitsSettings) -> list[CheckedFact]:
    """Fold and check facts without opening anything: a front end calls it before it
    opens the memory, so that bad input creates no file and loads no model."""
    return fact_service.validate_new_facts(items, limits)


@contextmanager
def open_memory(
    settings: Settings,
    *,
    load_model: bool = False,
    download: bool = False,
    progress: bool = False,
    check_width: bool = True,
    clock: Clock | None = None,
) -> Iterator[Memory]:
    """The memory for one command (migrated, rules loaded, the model if asked), closed
    at the end. `check_width=False` is for `reindex --rebuild` alone."""
    runtime = open_runtime(
        settings,
        load_model=load_model,
        download=download,
        progress=progress,
        check_width=check_width,
    )
    try:
        yield Memory(runtime, clock=clock)
    finally:
        runtime.close()


__all__ = [
    "ActivityFilters",
    "Browse",
    "CheckedFact",
    "Entry",
    "EntryPage",
    "Fact",
    "FactPage",
    "FactView",
    "IssuedToken",
    "Memory",
    "NewFact",
    "Node",
    "Overview",
    "SearchPage",
    "SearchRequest",
    "SeenAs",
    "Similar",
    "StoredFact",
    "TokenRecord",
    "check_facts",
    "moment_of",
    "open_memory",
]
