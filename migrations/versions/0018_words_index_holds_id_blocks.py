"""PostgreSQL's GIN index of a fact's words holds the fact's block of ids too.

A keyword search reads each word's newest holders the reader may see, at most 100. A GIN
index hands out a word's holders in no order, so a common word was walked along the
primary key, newest first, every fact read and tested until 100 held the word and passed
the rules: thousands of facts for a word most of them do not hold. Each fact's block of
1,024 ids (`'b' || id / 1024`) is now a third column of the index of words and scope
tokens (0014's), and a common word's walk asks the index for the facts holding the word in
its newest blocks (app.db.dialects.postgresql, BLOCK_IDS): only those holders are read.
The rows are the same, newest first; a word whose blocks hold too few is walked on below
them.

The index is built again (0.8 s at 100k facts, 4.1 s at a million, on /dev/shm here).
SQLite is untouched: FTS5's doclists hand out a word's holders newest first already.
The downgrade builds 0014's.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "facts_words_scope_idx"
PENDING_LIST_KB = 64
# Written as app.db.dialects.postgresql's _BLOCK writes it: the planner uses the index for
# the statements whose expression is the index's own. The block size is this revision's.
BLOCK = "to_tsvector('simple'::regconfig, 'b' || (id / 1024)::text)"


def _build(columns: str) -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
    op.execute(
        f"CREATE INDEX {INDEX} ON facts USING gin ({columns}) "
        f"WITH (gin_pending_list_limit = {PENDING_LIST_KB})"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _build(f"content_tsv, scope_tsv, ({BLOCK})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _build("content_tsv, scope_tsv")
