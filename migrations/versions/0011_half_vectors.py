"""PostgreSQL keeps each vector at half precision: facts_vec.embedding becomes halfvec.

A fact's vector was stored twice at 4 bytes a dimension on PostgreSQL: in facts_vec's
heap and in its HNSW graph (1,536 B each at 384 dimensions, most of the 4.9 KB a fact
took at 100k facts; issue 33 holds a fact to 3.5 KB). pgvector's halfvec stores 2
bytes a dimension in both. An IEEE half keeps 11 significant bits: a unit vector's
cosine moves by about 1e-4, far below what separates two facts in a ranking (the
bench's recall@10 under the access rules is measured again in docs/postgresql.md), and
HNSW indexes halfvec up to 4,000 dimensions where vector stops at 2,000.

The graph cannot change its operator class in place: it is dropped, the column is
converted, and the graph is built again, with the memory a build of this size needs.
SQLite keeps its layout (facts.embedding the float32 copy, facts_vec its codes). The
downgrade converts back to vector (the halves widen exactly; the precision lost stays
lost).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _rebuild(kind: str) -> None:
    conn = op.get_bind()
    # Minutes at a million vectors (the count, the rewrite, the graph's build: 174 s):
    # past the statement timeout a server's connections carry (database.statement_timeout_ms).
    op.execute("SET LOCAL statement_timeout = 0")
    # The column's declared width (pgvector keeps it as the type modifier).
    width = conn.exec_driver_sql(
        "SELECT atttypmod FROM pg_attribute "
        "WHERE attrelid = 'facts_vec'::regclass AND attname = 'embedding'"
    ).scalar_one()
    count = conn.exec_driver_sql("SELECT count(*) FROM facts_vec").scalar_one()
    op.execute("DROP INDEX IF EXISTS facts_vec_hnsw")
    op.execute(
        f"ALTER TABLE facts_vec ALTER COLUMN embedding TYPE {kind}({int(width)}) "
        f"USING embedding::{kind}({int(width)})"
    )
    # The graph is built in memory when it fits maintenance_work_mem (as build_index).
    memory = max(64, min(8192, int(count) * (6 * int(width) + 256) // 2**20 + 64))
    op.execute(f"SET LOCAL maintenance_work_mem = '{memory}MB'")
    op.execute(f"CREATE INDEX facts_vec_hnsw ON facts_vec USING hnsw (embedding {kind}_cosine_ops)")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild("halfvec")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild("vector")
