"""The one column type that differs between the backends (a type of app.db.tables)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Dialect, LargeBinary, TypeDecorator


class EmbeddingColumn(TypeDecorator[Any]):
    """facts.embedding: on SQLite the fact's vector, float32 little-endian (its one full
    copy); on PostgreSQL a boolean, true when facts_vec holds the vector (its one copy
    there, migration 0009). Either way NULL while the fact waits for a model, so the
    embedding queue and every "has a vector" test read the same on both.

    Written with a vector's bytes (or None), it stores what the backend keeps. The
    vector itself is read through the backend's `vectors.stored()`, never from here:
    on PostgreSQL this column reads back true."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Boolean())
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if dialect.name == "postgresql" and value is not None:
            return True
        return value
