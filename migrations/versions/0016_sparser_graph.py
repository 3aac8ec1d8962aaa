"""PostgreSQL's HNSW graph links each vector to 8 others (m 8) instead of pgvector's 16.

Storing a fact on PostgreSQL spent most of its own time inserting the vector into the
graph: at a batch ingest's sizes 0.85-1.67 ms a vector at m 16, 0.51-0.69 at m 8, where
the rest of the row costs 0.04 (docs/benchmarks.md, 2026-12-07). Issue 33 asks a batch
store on PostgreSQL for 0.8 of SQLite's speed; it measured 0.74-0.86. Searches ask the
graph at ef_search 400 or more (EF_SEARCH), where a sparser graph finds about as much:
recall@10 under the access rules 0.986 with either at 100k facts, 0.992 against 0.995 at
a million; the semantic ranking no slower; the graph built in 10.9 s instead of 15.8 at
100k (154.5 s instead of 205 at a million) and about 150 B a fact smaller. A store's
`similar` walk is widened with it (SIMILAR_EF_SEARCH 60 -> 100). After it, a batch
store on PostgreSQL ran at 0.86-0.88 of SQLite's.

The graph is built again at the new width, with the memory a build of this size needs.
SQLite has no such graph. The downgrade builds it again at pgvector's default.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _rebuild(links: int) -> None:
    conn = op.get_bind()
    # Minutes at a million vectors: past the statement timeout a server's connections
    # carry (database.statement_timeout_ms).
    op.execute("SET LOCAL statement_timeout = 0")
    width = conn.exec_driver_sql(
        "SELECT atttypmod FROM pg_attribute "
        "WHERE attrelid = 'facts_vec'::regclass AND attname = 'embedding'"
    ).scalar_one()
    count = conn.exec_driver_sql("SELECT count(*) FROM facts_vec").scalar_one()
    op.execute("DROP INDEX IF EXISTS facts_vec_hnsw")
    # The graph is built in memory when it fits maintenance_work_mem (as build_index).
    memory = max(64, min(8192, int(count) * (6 * int(width) + 256) // 2**20 + 64))
    op.execute(f"SET LOCAL maintenance_work_mem = '{memory}MB'")
    op.execute(
        "CREATE INDEX facts_vec_hnsw ON facts_vec "
        f"USING hnsw (embedding halfvec_cosine_ops) WITH (m = {int(links)})"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(8)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(16)
