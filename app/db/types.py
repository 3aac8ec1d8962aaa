"""The one column type that differs between the backends (a type of app.db.tables)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Dialect, LargeBinary, TypeDecorator


class _VectorKept(TypeDecorator[Any]):
    """PostgreSQL's facts.embedding: true when facts_vec holds the fact's vector."""

    impl = Boolean
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else True


# facts.embedding: on SQLite the fact's vector, float32 little-endian (its one full
# copy); on PostgreSQL a boolean, true when facts_vec holds the vector (its one copy
# there, migration 0009). Either way NULL while the fact waits for a model, so the
# embedding queue and every "has a vector" test read the same on both. Written with a
# vector's bytes (or None), it stores what the backend keeps. The vector itself is
# read through the backend's `vectors.stored()`, never from here: on PostgreSQL this
# column reads back true.
EmbeddingColumn = LargeBinary().with_variant(_VectorKept(), "postgresql")
