"""What differs between the two backends, one small seam per concern.

Services are written once against SQLAlchemy Core. The few statements that Core
cannot say the same way on SQLite and PostgreSQL sit here, each behind one
interface, and the implementation is chosen once per call site by the dialect
of the connection in hand (`backend(conn)`), never by `if dialect ==` in a service:

- keywords: FTS5's doclists on SQLite (its bm25 is never read); a tsvector column with
  a GIN index on PostgreSQL;
- vectors: facts.embedding and the codes of the process's in-memory index on SQLite;
  a pgvector column with an HNSW index, searched in the database and the one copy of
  each vector, on PostgreSQL;
- upserts and explicit ids: each dialect's INSERT ... ON CONFLICT, and moving
  PostgreSQL's sequences past ids an import wrote;
- id lists: a JSON array that SQLite unpacks, an array parameter on PostgreSQL.

Functions whose spelling alone differs (two-argument max) are SQL constructs
compiled per dialect, in app.db.dialects.functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from sqlalchemy import Connection, Engine, Table
from sqlalchemy.sql.elements import ColumnElement

from app.db.statements import Statements

# A search's statement cache (app.services.search.Scope.statement): the statement
# `build` makes from the search's clauses, kept under `kind`.
StatementOf = Callable[[str, Callable[[list[Any]], Any]], Any]


class Keywords(Protocol):
    """The keyword index. A term is one word of a query (letters and digits, as
    app.services.search.query_terms gives it): the index matches it by its stem."""

    def matches_statement(self, clauses: list[Any], terms: int, scoped: bool = False) -> Any:
        """One statement for `terms` terms: for each, the facts that pass `clauses` and
        hold it, newest (highest id) first, at most `:limit` of them, as (the term's
        index, fact id, characters of content). Each term's walk stops after `:limit`
        rows pass, however many facts hold it. match_params() binds it. `scoped`: the
        index's walk is narrowed to the facts holding one of the scope tokens the
        params name (app.acl.scope), found in the index with the words."""
        ...

    def match_params(
        self, terms: Sequence[str], limit: int, scope: Sequence[str] | None = None
    ) -> dict[str, Any]: ...

    def matches(
        self,
        conn: Connection,
        terms: Sequence[str],
        limit: int,
        scope: Sequence[str] | None,
        statement: StatementOf,
    ) -> Sequence[Any]:
        """Each term's newest `limit` facts that hold it and pass the search's clauses,
        as matches_statement's rows. `statement(kind, build)` is the search's statement
        cache: `build` makes a statement from the clauses (matches_statement's), once
        per reader and kind. `scope`: the reader's scope tokens, or None."""
        ...

    def scope_members(
        self, conn: Connection, tokens: Sequence[str], limit: int, after: int = 0
    ) -> list[int]:
        """The first `limit` facts after fact id `after` (ascending) holding one of the
        scope `tokens` (app.acl.scope)."""
        ...

    def scope_count(self, conn: Connection, tokens: Sequence[str], at_most: int) -> int:
        """How many facts hold one of the scope `tokens`, counted up to `at_most` + 1."""
        ...

    def document_frequency(self, conn: Connection, term: str) -> int:
        """Facts of the whole index holding `term`: for checks that the index is in step,
        never for a score."""
        ...


def walk_matches(
    keywords: Keywords,
    conn: Connection,
    terms: Sequence[str],
    limit: int,
    scope: Sequence[str] | None,
    statement: StatementOf,
) -> Sequence[Any]:
    """The walk both backends share: each term's newest `limit` holders that pass the
    search's clauses, through `keywords`' matches_statement, kept in the search's
    statement cache; rows (the term's place in `terms`, fact id, characters)."""
    scoped = scope is not None
    stmt = statement(
        f"matches-{len(terms)}-{scoped}",
        lambda clauses: keywords.matches_statement(clauses, len(terms), scoped),
    )
    return conn.execute(stmt, keywords.match_params(terms, limit, scope)).all()


@dataclass(frozen=True)
class VectorsMissing:
    """A part of the vectors' schema that is not in the database although its revision
    says the schema is complete (a restore that skipped it): `detail` says what and how
    to put it back, for the operator and for /readyz (no SQL statement, no file path).
    `usable`: searches and stores still work without it, only slower."""

    detail: str
    usable: bool = False


class Vectors(Protocol):
    @property
    def in_database(self) -> bool:
        """True when nearest-neighbour search runs in the database (else: the process's
        in-memory index, app.services.vector_index)."""
        ...

    def stored(self) -> Any:
        """A fact's vector as float32 little-endian bytes, NULL when it has none, as a
        column of a statement over `facts`: SQLite's facts.embedding, PostgreSQL's
        facts_vec copy (there facts.embedding only says that it has one). Filter on
        `facts.c.embedding.is_not(None)`, which the embedding queue's index serves."""
        ...

    def write(self, conn: Connection, fact_ids: Sequence[int], blobs: Sequence[bytes]) -> None:
        """Put the facts' float32 vectors in the database's nearest-neighbour index."""
        ...

    def recreate(self, conn: Connection, width: int) -> None:
        """Drop every vector and make the index again at `width`."""
        ...

    def pause_index(self, conn: Connection) -> bool:
        """Before a bulk load: stop keeping the nearest-neighbour index with each write.
        True when there was one to stop, which `build_index` must then make again
        (PostgreSQL drops its HNSW index: building it over the loaded vectors takes a
        fraction of inserting them one at a time). In the caller's transaction."""
        ...

    def build_index(self, conn: Connection) -> None:
        """After a bulk load: build the index `pause_index` stopped."""
        ...

    def estimated_vectors(self, conn: Connection) -> int:
        """About how many vectors the memory holds (a planner's estimate will do)."""
        ...

    def missing(self, conn: Connection) -> VectorsMissing | None:
        """What of the vectors' schema the database lacks (one look at its catalog), or
        None: asked by readiness, at start, and after a statement failed on an object
        that does not exist, never before each request."""
        ...

    def nearest(
        self,
        conn: Connection,
        filters: list[Any],
        query: np.ndarray,
        want: int,
        within: Sequence[str] | None = None,
    ) -> list[tuple[int, float]]:
        """(fact id, cosine distance) nearest first among the facts the filters keep;
        `within`: scope tokens naming a small part of the memory that holds them all."""
        ...

    def nearest_many(
        self,
        conn: Connection,
        filters: list[Any],
        queries: Sequence[np.ndarray],
        wants: Sequence[int],
        close: bool = False,
    ) -> list[list[tuple[int, float]]]:
        """`nearest` for each query, `wants[i]` for the i-th, in fewer statements;
        `close`: only neighbours near enough to be near-duplicates are wanted."""
        ...


class Backend(Protocol):
    @property
    def name(self) -> str:
        """`sqlite` or `postgresql`."""
        ...

    @property
    def keywords(self) -> Keywords: ...

    @property
    def vectors(self) -> Vectors: ...

    def insert(self, table: Table) -> Any:
        """The dialect's INSERT, which has on_conflict_do_update / on_conflict_do_nothing."""
        ...

    @property
    def statements(self) -> Statements:
        """Statements that name no subject, built once for this backend."""
        ...

    def ids_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """`column IN ids` for a list of any length, in the one bound parameter `name`
        given at execution: statements are built once (app.db.statements)."""
        ...

    def ids_locked_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """`ids_in` for an UPDATE of rows that concurrent transactions update too (a
        search's recalls): where writers run at once, the rows are locked in id order
        first, so two such UPDATEs never deadlock."""
        ...

    def after_explicit_ids(self, conn: Connection, table: Table) -> None:
        """Rows were inserted with their ids given: later inserts must not reuse them."""
        ...

    def dump_command(self, engine: Engine, target: Path) -> tuple[list[str], dict[str, str]] | None:
        """The server's own dump tool writing `target` (argv, environment), or None where
        the memory is a file that embornal copies itself (SQLite's online backup)."""
        ...

    def database_file(self, engine: Engine) -> Path | None:
        """The file the memory is (SQLite), or None: in memory, or on a server."""
        ...

    def database_bytes(self, engine: Engine) -> int | None:
        """Bytes the memory takes on disk, or None when it cannot be told (in memory)."""
        ...

    def lock_schema(self, conn: Connection) -> None:
        """Before migrating: replicas starting at once migrate one after the other."""
        ...

    def fold_log(self, engine: Engine) -> None:
        """Before the engine closes: what the database's write-ahead log holds goes into
        the database itself, so that the memory's file alone is the memory (a backup
        put back in its place must not meet a log written for the old one)."""
        ...

    def lock_tree(self, conn: Connection) -> None:
        """Before changing the tree (a new node, a path tag): one such change at a time,
        since each recomputes inherited tags from what it can see."""
        ...


_BACKENDS: dict[str, Backend] = {}


def backend(bind: Connection | Engine) -> Backend:
    """The seams of the backend `bind` talks to."""
    name = bind.dialect.name
    found: Backend | None = _BACKENDS.get(name)
    if found is None:
        if name == "postgresql":
            from app.db.dialects.postgresql import PostgresBackend

            found = PostgresBackend()
        else:
            from app.db.dialects.sqlite import SqliteBackend

            found = SqliteBackend()
        _BACKENDS[name] = found
    assert found is not None
    return found
