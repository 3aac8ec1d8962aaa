"""SQLite's side of the seams: FTS5 with bm25, vec0, and the in-memory vector index."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import (
    Connection,
    Engine,
    String,
    Table,
    TypeDecorator,
    bindparam,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.elements import ColumnElement

from app.db.statements import Statements
from app.db.tables import facts, facts_fts

_FTS: Any = literal_column("facts_fts")
# Rank in FTS5 alone (fast, in C); the caller keeps the visible ones.
_RANKED = (
    select(facts_fts.c.rowid, func.bm25(_FTS))
    .where(_FTS.op("MATCH")(bindparam("match")))
    .order_by(literal_column("rank"))
    .limit(bindparam("limit"))
)


class SqliteKeywords:
    def ranked(
        self, conn: Connection, chunks: Sequence[str], *, any_word: bool, limit: int
    ) -> list[tuple[int, float]]:
        match = (" OR " if any_word else " ").join(chunks)
        rows = conn.execute(_RANKED, {"match": match, "limit": limit}).all()
        return [(int(fid), float(score)) for fid, score in rows]

    def newest_statement(self, clauses: list[Any], chunks: int) -> Any:
        # FTS5 hands out its matches newest first (its doclists read backwards); with the
        # LIMIT it stops early, and bm25 is computed for the rows returned alone.
        return (
            select(facts_fts.c.rowid, func.bm25(_FTS), facts.c.content)
            .select_from(facts_fts.join(facts, facts.c.id == facts_fts.c.rowid))
            .where(_FTS.op("MATCH")(bindparam("match")), *clauses)
            .order_by(facts_fts.c.rowid.desc())
            .limit(bindparam("limit"))
        )

    def newest_params(self, chunks: Sequence[str], limit: int) -> dict[str, Any]:
        return {"match": " OR ".join(chunks), "limit": limit}

    def document_frequency(self, conn: Connection, chunk: str) -> int:
        return conn.execute(
            select(func.count()).select_from(facts_fts).where(_FTS.op("MATCH")(chunk))
        ).scalar_one()


class SqliteVectors:
    # Each server process keeps its own index in memory (app.services.vector_index).
    in_database = False

    def write(self, conn: Connection, fact_ids: Sequence[int], blobs: Sequence[bytes]) -> None:
        raise NotImplementedError("SQLite's codes are app.services.vector_index's to write")

    def recreate(self, conn: Connection, width: int) -> None:
        pass  # the codes table has no width; app.services.vector_index clears it

    def nearest(
        self, conn: Connection, filters: list[Any], query: np.ndarray, want: int
    ) -> list[tuple[int, float]]:
        raise NotImplementedError("SQLite searches vectors in the process's in-memory index")


class _JsonIds(TypeDecorator[Any]):
    """A list of ids bound as one JSON array, which json_each unpacks."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> str:
        return json.dumps([int(i) for i in value])


class SqliteBackend:
    name = "sqlite"

    def __init__(self) -> None:
        self.keywords = SqliteKeywords()
        self.vectors = SqliteVectors()
        self.statements = Statements()

    def insert(self, table: Table) -> Any:
        return sqlite_insert(table)

    def ids_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        # One JSON parameter: no limit on the number of ids, one statement to cache.
        array = bindparam(name, type_=_JsonIds())
        unpacked = select(text("value")).select_from(func.json_each(array))
        return column.in_(unpacked.scalar_subquery())

    def ids_locked_in(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        return self.ids_in(column, name)  # one writer at a time: no lock order to keep

    def after_explicit_ids(self, conn: Connection, table: Table) -> None:
        pass  # an INTEGER PRIMARY KEY goes on from the largest id by itself

    def database_bytes(self, engine: Engine) -> int | None:
        # The file and its write-ahead log, which holds commits not yet checkpointed.
        name = engine.url.database
        if not name or name == ":memory:":
            return None
        base = Path(name)
        parts = (base.with_name(base.name + suffix) for suffix in ("", "-wal"))
        return sum(part.stat().st_size for part in parts if part.is_file())

    def dump_command(self, engine: Engine, target: Path) -> tuple[list[str], dict[str, str]] | None:
        return None  # app.services.transfer copies the file with SQLite's online backup

    def lock_schema(self, conn: Connection) -> None:
        pass  # BEGIN IMMEDIATE: the migration holds the one write lock

    def lock_tree(self, conn: Connection) -> None:
        pass  # a write transaction holds the database's one write lock already
