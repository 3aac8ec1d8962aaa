"""SQLite's side of the seams: FTS5's doclists (its bm25 is never read), vec0, and the
in-memory vector index."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import (
    Connection,
    Engine,
    Integer,
    String,
    Table,
    TypeDecorator,
    bindparam,
    func,
    literal,
    literal_column,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.elements import ColumnElement

from app.db.dialects import StatementOf, VectorsMissing, walk_matches
from app.db.statements import Statements
from app.db.tables import facts, facts_fts

_FTS: Any = literal_column("facts_fts")
log = logging.getLogger(__name__)
# How long a close waits to fold the WAL while other connections read or write it.
CHECKPOINT_WAIT_MS = 200


def _in_content(term: str) -> str:
    """An FTS5 query for `term` as one quoted phrase (no operator can hide in it), in the
    content column only: a scope token is never a match for a word."""
    return '{content} : "' + term.replace('"', '""') + '"'


def _fts_limit(name: str) -> Any:
    """A LIMIT over FTS5, written into the statement's text rather than bound. SQLite
    hands a query's LIMIT to a virtual table's planner, so a LIMIT bound as a parameter
    makes the statement stale each time it is bound: it was compiled again on every
    execution (1.2 ms for a hybrid search's six walks with a reader's rules, 10k facts).
    The walks' value is a constant, so the statement cache keeps one text; scope_members'
    follows the memory's size, and each new value is compiled once, not each time."""
    return bindparam(name, type_=Integer(), literal_execute=True)


def _in_scope(tokens: Sequence[str]) -> str:
    """An FTS5 query for the facts holding one of the scope `tokens` (app.acl.scope)."""
    return f"{{scope}} : ({' OR '.join(tokens)})"


class SqliteKeywords:
    def matches_statement(self, clauses: list[Any], terms: int, scoped: bool = False) -> Any:
        # FTS5 hands out its matches newest first (its doclists read backwards); with the
        # LIMIT each term's walk stops after that many rows pass the clauses. The scope
        # tokens, when given, are in each term's MATCH string (match_params): FTS5
        # intersects the doclists, the statement is the same.
        parts = []
        for i in range(terms):
            newest = (
                select(facts_fts.c.rowid.label("id"), func.length(facts.c.content).label("n"))
                .select_from(facts_fts.join(facts, facts.c.id == facts_fts.c.rowid))
                .where(_FTS.op("MATCH")(bindparam(f"term{i}")), *clauses)
                .order_by(facts_fts.c.rowid.desc())
                .limit(_fts_limit("limit"))
                .subquery(f"t{i}")
            )
            parts.append(select(literal(i).label("term"), newest.c.id, newest.c.n))
        return union_all(*parts) if len(parts) > 1 else parts[0]

    def match_params(
        self, terms: Sequence[str], limit: int, scope: Sequence[str] | None = None
    ) -> dict[str, Any]:
        within = f" AND {_in_scope(scope)}" if scope else ""
        return {
            **{f"term{i}": _in_content(t) + within for i, t in enumerate(terms)},
            "limit": limit,
        }

    def matches(
        self,
        conn: Connection,
        terms: Sequence[str],
        limit: int,
        scope: Sequence[str] | None,
        statement: StatementOf,
    ) -> Sequence[Any]:
        # FTS5 reads each term's doclist newest first: one walk a term, whatever it holds.
        return walk_matches(self, conn, terms, limit, scope, statement)

    def scope_members(
        self, conn: Connection, tokens: Sequence[str], limit: int, after: int = 0
    ) -> list[int]:
        stmt = (
            select(facts_fts.c.rowid)
            .where(_FTS.op("MATCH")(bindparam("m")), facts_fts.c.rowid > bindparam("after"))
            .order_by(facts_fts.c.rowid)
            .limit(_fts_limit("limit"))
        )
        params = {"m": _in_scope(tokens), "after": after, "limit": limit}
        return list(conn.execute(stmt, params).scalars())

    def scope_count(self, conn: Connection, tokens: Sequence[str], at_most: int) -> int:
        return len(self.scope_members(conn, tokens, at_most + 1))

    def document_frequency(self, conn: Connection, term: str) -> int:
        return conn.execute(
            select(func.count()).select_from(facts_fts).where(_FTS.op("MATCH")(_in_content(term)))
        ).scalar_one()


class SqliteVectors:
    # Each server process keeps its own index in memory (app.services.vector_index).
    in_database = False

    def stored(self) -> Any:
        return facts.c.embedding

    def write(self, conn: Connection, fact_ids: Sequence[int], blobs: Sequence[bytes]) -> None:
        raise NotImplementedError("SQLite's codes are app.services.vector_index's to write")

    def recreate(self, conn: Connection, width: int) -> None:
        pass  # the codes table has no width; app.services.vector_index clears it

    def pause_index(self, conn: Connection) -> bool:
        return False  # a code is appended per fact, as cheap in a bulk load as anywhere

    def build_index(self, conn: Connection) -> None:
        pass

    def estimated_vectors(self, conn: Connection) -> int:
        raise NotImplementedError("SQLite's in-memory index counts its own vectors")

    def missing(self, conn: Connection) -> VectorsMissing | None:
        return None  # one file, copied whole: no restore leaves a table out

    def nearest(
        self,
        conn: Connection,
        filters: list[Any],
        query: np.ndarray,
        want: int,
        within: Sequence[str] | None = None,
    ) -> list[tuple[int, float]]:
        raise NotImplementedError("SQLite searches vectors in the process's in-memory index")

    def nearest_many(
        self,
        conn: Connection,
        filters: list[Any],
        queries: Sequence[np.ndarray],
        wants: Sequence[int],
        close: bool = False,
    ) -> list[list[tuple[int, float]]]:
        raise NotImplementedError("SQLite searches vectors in the process's in-memory index")


class _JsonIds(TypeDecorator[Any]):
    """A list of ids bound as one JSON array, which json_each unpacks."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str:
        return json.dumps([int(i) for i in value])


def _json_ids_in(column: Any, name: str) -> Any:
    # One JSON parameter: no limit on the number of ids, one statement to cache.
    array = bindparam(name, type_=_JsonIds())
    unpacked = select(text("value")).select_from(func.json_each(array))
    return column.in_(unpacked.scalar_subquery())


class SqliteBackend:
    name = "sqlite"

    def __init__(self) -> None:
        self.keywords = SqliteKeywords()
        self.vectors = SqliteVectors()
        self.statements = Statements()

    def insert(self, table: Table) -> Any:
        return sqlite_insert(table)

    def ids_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        return _json_ids_in(column, name)

    def ids_locked_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        return self.ids_in(column, name)  # one writer at a time: no lock order to keep

    def after_explicit_ids(self, conn: Connection, table: Table) -> None:
        pass  # an INTEGER PRIMARY KEY goes on from the largest id by itself

    def database_file(self, engine: Engine) -> Path | None:
        name = engine.url.database
        if not name or name == ":memory:":
            return None
        return Path(name)

    def database_bytes(self, engine: Engine) -> int | None:
        # The file and its write-ahead log, which holds commits not yet checkpointed.
        base = self.database_file(engine)
        if base is None:
            return None
        parts = (base.with_name(base.name + suffix) for suffix in ("", "-wal"))
        return sum(part.stat().st_size for part in parts if part.is_file())

    def dump_command(self, engine: Engine, target: Path) -> tuple[list[str], dict[str, str]] | None:
        return None  # app.services.transfer copies the file with SQLite's online backup

    def lock_schema(self, conn: Connection) -> None:
        pass  # BEGIN IMMEDIATE: the migration holds the one write lock

    def fold_log(self, engine: Engine) -> None:
        """The last connection to close folds the WAL into memory.db and removes -wal and
        -shm. While another process still has the file open (a command, a second server)
        they stay, the WAL holding pages memory.db lacks: a backup copied over memory.db
        then had that stale WAL replayed onto it (integrity_check: malformed). A TRUNCATE
        checkpoint moves every commit into memory.db and empties the WAL whoever else has
        the file open. It waits for readers of older snapshots, and writers wait for it
        meanwhile: a command closing beside a busy server gives up after
        CHECKPOINT_WAIT_MS rather than hold the server's writes (the server's own close,
        or the last connection's, folds it later)."""
        try:
            # The driver's own connection: the engine's `begin` event would open a
            # transaction around the pragma.
            dbapi_conn = engine.raw_connection()
            try:
                cursor = dbapi_conn.cursor()
                cursor.execute(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
                busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                dbapi_conn.close()
            if busy:
                log.debug("the WAL was not emptied: another connection was busy with it")
        except Exception as exc:
            # Closing goes on: the WAL is replayed at the next open, as after a crash.
            log.warning("the WAL could not be folded into the memory file: %s", exc)

    def lock_tree(self, conn: Connection) -> None:
        pass  # a write transaction holds the database's one write lock already
