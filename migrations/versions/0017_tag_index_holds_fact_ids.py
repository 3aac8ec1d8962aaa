"""PostgreSQL's index of fact tags by (key, value) holds each row's fact id too.

The read rules name tags ("visibility=public", "secret=yes"), and PostgreSQL tests a
walked fact against a rule's tag by hashing the ids of every fact holding it, once a
statement, when they are few enough (a deny rule's 1,031 facts of 100k). It read them
from fact_tags through (key, value) with a bitmap, which the keyword walks' least
work_mem (64 kB, so that the many-holder tags are never hashed) made lossy: 87,541 rows
rechecked and 15.6 ms for one word's walk (`EXPLAIN (ANALYZE, BUFFERS)`), again for each
of a question's words. With the fact id in the index the same ids come from an index-only
scan (0.24 ms, no heap fetch), whatever work_mem. At 100k facts, for the bench's reader
of 50 policy lines, in one process with the two indexes in alternate blocks: hybrid's
keyword half 61.3 -> 36.7 ms p50 (p90 89.8 -> 56.4), the whole hybrid ranking 65.6 ->
43.3 (93.9 -> 63.5), the same matches and pages for 100 of 100 questions
(docs/postgresql.md).

The index is a little larger than the one it replaces (5.8 MB more at 100k facts with
two tags a fact, 58 B a fact: btree deduplication does not apply to included columns).
SQLite is untouched: its plans probe each fact's own tags by the primary key. The
downgrade makes the (key, value) index again.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "ix_fact_tags_key_value"
NEW = "ix_fact_tags_key_value_fact"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"CREATE INDEX {NEW} ON fact_tags (key, value) INCLUDE (fact_id)")
    op.execute(f"DROP INDEX IF EXISTS {OLD}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"CREATE INDEX {OLD} ON fact_tags (key, value)")
    op.execute(f"DROP INDEX IF EXISTS {NEW}")
