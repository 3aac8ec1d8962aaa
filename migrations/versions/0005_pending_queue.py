"""The embedding queue holds only facts that can still be read: deleted ones leave it.

facts_pending_embedding_idx was `WHERE embedding IS NULL`, so a deleted fact stayed
in the queue for ever (nothing embeds it) and every reindex scanned past it. Every
query of the queue says `embedding IS NULL AND deleted_at IS NULL`, which this
index now is, so SQLite can use it for each of them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS facts_pending_embedding_idx")
    op.execute(
        "CREATE INDEX facts_pending_embedding_idx ON facts (id) "
        "WHERE embedding IS NULL AND deleted_at IS NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS facts_pending_embedding_idx")
    op.execute("CREATE INDEX facts_pending_embedding_idx ON facts (id) WHERE embedding IS NULL")
