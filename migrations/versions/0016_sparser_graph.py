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

The graph is dropped and built again with 8 links a vector the way a bulk load's build
makes it (build_hnsw_index: the memory and the time a build of this size needs). SQLite
has no such graph. The downgrade builds it again at pgvector's default, 16.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from app.db.dialects.postgresql import HNSW_INDEX, build_hnsw_index

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _rebuild(links: int) -> None:
    # The build a bulk load ends with (its memory and time), at `links` named here: what
    # this revision means does not move with HNSW_LINKS.
    op.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
    build_hnsw_index(op.get_bind(), links)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(8)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(16)
