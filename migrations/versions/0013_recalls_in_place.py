"""PostgreSQL updates a recalled fact in place (HOT): no index holds what a recall changes.

Every search recalls the facts of its page: an UPDATE of last_recall_at, recall_count
and stability_days. ix_facts_live (migration 0007) holds two of those columns, so on
PostgreSQL no recall could be a heap-only update: each wrote a new version of the row
into every index of `facts`, every word of the fact into the GIN pending list among
them (on the 100k bench memory, 7,327 updates of `facts` after its runs, 5 of them
HOT), and left as many dead entries for VACUUM. 0007 made the index cover those
columns because a row then held its 1.5-3 KiB vector; since 0009 PostgreSQL keeps the
vector in facts_vec and a row of `facts` is small, so the heap is cheap to read there.

On PostgreSQL the index keeps the node, deletion and creation columns only, and
`facts` leaves a tenth of each page free (fillfactor 90) for a recall's new version to
go beside the old one. Measured on that memory (agent's 50 rules, p50): the console's
standing 112.9 -> 108.6 ms, a listing by strength 105.7 -> 103.4, a subtree count
63.3 -> 55.8, a recall of ten facts 5.35 -> 4.32 ms, 93 of 126 recall updates HOT
(none before); a search's recall writes 2.3-2.7 -> 1.6-1.8 ms. Pages filled before
this migration get their free space as VACUUM prunes them. SQLite keeps 0007's index:
its rows still carry their vectors, and it updates only the index entries whose
columns change.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COVERING = ["path_id", "deleted_at", "created_at", "last_recall_at", "stability_days"]
WITHOUT_RECALLS = ["path_id", "deleted_at", "created_at"]
FILLFACTOR = 90


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_facts_live", table_name="facts")
    op.create_index("ix_facts_live", "facts", WITHOUT_RECALLS)
    op.execute(f"ALTER TABLE facts SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE facts RESET (fillfactor)")
    op.drop_index("ix_facts_live", table_name="facts")
    op.create_index("ix_facts_live", "facts", COVERING)
