"""A covering index for counting and ranking the facts a subject sees.

A fact's row holds its content and its 1.5-3 KiB vector, so a scan of `facts` reads
the whole vector store: counting the current facts of a 100k memory took 139 ms
(`deleted_at IS NULL` alone), ordering them by strength 180 ms. The columns those
scans need (the node, deletion, and the strength's clock and stability) fit in an
index a few MiB large, which SQLite scans instead: 7 ms and 26 ms. Path listings
and subtree counts join on `path_id` first, so it leads. The console's overview and
tree, `GET /v1/paths/`, and `sort=strength` listings are the readers.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ["path_id", "deleted_at", "created_at", "last_recall_at", "stability_days"]


def upgrade() -> None:
    op.create_index("ix_facts_live", "facts", COLUMNS)


def downgrade() -> None:
    op.drop_index("ix_facts_live", table_name="facts")
