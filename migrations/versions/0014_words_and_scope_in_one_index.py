"""PostgreSQL keeps a fact's words and its scope tokens in one GIN index.

A reader whose rules name a small part of the memory (app.acl.scope) asks each of its
query's words for the newest facts holding the word and one of its scope tokens. With
an index for each column, every word's walk built two bitmaps and intersected them:
the scope's bitmap holds every fact of the reader's part (5,025 in
bench.reader_cost_bench's shared memory, 0.4-0.5 ms to build, again for each of a
hybrid search's six words), however few of them hold the word. One GIN index over both
columns intersects the two posting lists inside the index: five words' walks there
took 0.4-2.1 ms each with two indexes, 0.05-0.17 ms with one (`EXPLAIN ANALYZE`, the
same memory). A question about one column alone is served as well by the two-column index
(PostgreSQL: "the same regardless of which index column(s) the query conditions
use"), and it is smaller than the two (7.7 MB against 6.9 + 1.5 at 105k facts).

The index keeps 0012's short pending list (64 kB). The downgrade makes the two indexes
again. SQLite is untouched: FTS5 finds the scope tokens in the same table already.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "facts_words_scope_idx"
# 0001's and 0010's, each over one column, with 0012's pending list.
SINGLE = {"facts_content_tsv_idx": "content_tsv", "facts_scope_tsv_idx": "scope_tsv"}
PENDING_LIST_KB = 64


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"CREATE INDEX {INDEX} ON facts USING gin (content_tsv, scope_tsv) "
        f"WITH (gin_pending_list_limit = {PENDING_LIST_KB})"
    )
    for name in SINGLE:
        op.execute(f"DROP INDEX IF EXISTS {name}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, column in SINGLE.items():
        op.execute(
            f"CREATE INDEX {name} ON facts USING gin ({column}) "
            f"WITH (gin_pending_list_limit = {PENDING_LIST_KB})"
        )
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
