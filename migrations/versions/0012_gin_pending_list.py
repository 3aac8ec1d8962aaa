"""PostgreSQL's keyword indexes keep a short pending list: every search reads all of it.

A GIN index with fastupdate (PostgreSQL's default) puts new entries in a pending list,
unsorted, and merges them into the tree when the list passes gin_pending_list_limit
(4 MB by default) or when VACUUM runs. Every scan of the index reads the whole list.
Measured on the bench's memory of 100k facts right after its build (300 pages
pending): each word's bitmap scan of facts_content_tsv_idx took 2.3-2.5 ms, 0.05-0.16 ms
once the list was merged; a keyword search of five to ten words went from 25-42 ms to
17-26 ms. In a memory that takes facts all day the list is anywhere between empty and
full, and so was every search's cost.

Both GIN indexes (the words, migration 0001; the scope tokens, 0010) now merge at
64 kB: a store still adds to the list and a later store merges a few dozen facts'
entries at once, so the merge stays batched, and no scan reads more than 8 pages of
it. The upgrade merges what is pending now. SQLite is untouched (FTS5 has no such list).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GIN_INDEXES = ("facts_content_tsv_idx", "facts_scope_tsv_idx")
PENDING_LIST_KB = 64


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX {index} SET (gin_pending_list_limit = {PENDING_LIST_KB})")
        op.execute(f"SELECT gin_clean_pending_list('{index}'::regclass)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX {index} RESET (gin_pending_list_limit)")
