"""facts_vec holds what search reads: each fact's cell and sign-bit code.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

Until now facts_vec was a vec0 table holding a second float32 copy of every
vector (1.5 KB a fact at 384-d, ~40% of the file), which no search read: search
ranked sign-bit codes held in memory, rebuilt from facts.embedding at every start
(~18 us a fact: ~20 s at a million, with /readyz already saying ready). Now:

- facts.embedding stays the one full copy (and the pending queue keeps its meaning);
- facts_vec becomes a plain table of (list, fact_id, code), the code being what the
  search reads: one sign bit per dimension, then an int8 approximation (48 + 384
  bytes at 384-d, against 1536 for the float32 copy). It is clustered on
  (list, fact_id), so a start reads every code in one sequential pass, cell by
  cell, into arrays of exactly the right size;
- facts_vec_centroids holds the cells' centroids (an IVF partition trained by
  app.services.vector_index.repartition, which the runtime runs when a memory has
  outgrown its cells; this migration files every code in one cell, 0).

The upgrade moves an existing memory: it drops the vec0 copy and writes the code of
every embedded fact. The downgrade rebuilds the vec0 copy from facts.embedding.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 10_000


def _width(conn: sa.Connection) -> int:
    return int(
        conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'embedding_width'").scalar_one()
    )


def _bump_generation() -> None:
    # Running servers' in-memory indexes reload whole on a new generation.
    op.execute(
        "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
        "WHERE key = 'vector_generation'"
    )


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        # PostgreSQL searches in the database (pgvector HNSW over facts_vec, made by
        # 0001): no codes and no cells to keep. The key is there for the same reads.
        op.execute("INSERT INTO meta (key, value) VALUES ('vector_partitions', '')")
        return
    op.execute("DROP TABLE IF EXISTS facts_vec")
    op.create_table(
        "facts_vec",
        sa.Column("list", sa.Integer(), primary_key=True),
        sa.Column("fact_id", sa.Integer(), primary_key=True),
        sa.Column("code", sa.LargeBinary(), nullable=False),
        sqlite_with_rowid=False,
    )
    # write_codes replaces a fact's code by its id, and the index follows vector_log by id.
    op.create_index("ux_facts_vec_fact_id", "facts_vec", ["fact_id"], unique=True)
    op.create_table(
        "facts_vec_centroids",
        sa.Column("list", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("centroid", sa.LargeBinary(), nullable=False),
    )
    op.execute("INSERT INTO meta (key, value) VALUES ('vector_partitions', '')")
    width = _width(conn)
    after = 0
    while True:
        rows = conn.exec_driver_sql(
            "SELECT id, embedding FROM facts WHERE embedding IS NOT NULL AND id > ? "
            "ORDER BY id LIMIT ?",
            (after, BATCH),
        ).all()
        if not rows:
            break
        fitting = [r for r in rows if len(r[1]) == 4 * width]
        if fitting:
            vectors = np.stack([np.frombuffer(r[1], dtype="<f4") for r in fitting])
            # As app.services.vector_index.encode: sign bits, then int8 (x127, clipped).
            approx = np.clip(np.rint(vectors * 127.0), -127, 127).astype(np.int8)
            codes = np.hstack([np.packbits(vectors > 0, axis=-1), approx.view(np.uint8)])
            conn.exec_driver_sql(
                "INSERT INTO facts_vec (list, fact_id, code) VALUES (0, ?, ?)",
                [(r[0], c.tobytes()) for r, c in zip(fitting, codes, strict=True)],
            )
        after = rows[-1][0]
    _bump_generation()


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        op.execute("DELETE FROM meta WHERE key = 'vector_partitions'")
        return
    width = _width(conn)
    op.drop_table("facts_vec_centroids")
    op.drop_index("ux_facts_vec_fact_id", table_name="facts_vec")
    op.drop_table("facts_vec")
    op.execute("DELETE FROM meta WHERE key = 'vector_partitions'")
    op.execute(
        f"CREATE VIRTUAL TABLE facts_vec USING vec0("
        f"fact_id INTEGER PRIMARY KEY, embedding float[{width}] distance_metric=cosine)"
    )
    op.execute(
        "INSERT INTO facts_vec (fact_id, embedding) SELECT id, embedding FROM facts "
        f"WHERE embedding IS NOT NULL AND length(embedding) = {4 * width}"
    )
    _bump_generation()
