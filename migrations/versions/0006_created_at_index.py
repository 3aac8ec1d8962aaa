"""An index on facts (created_at, id): listings `as_of` a moment start at that moment.

A listing newest first walks facts by id from the newest; `as_of` an earlier moment it
would walk past every fact created since (half the memory for a moment half-way
through its life) before reaching one that existed then. With this index the `as_of`
listing orders by (created_at, id) and seeks straight to the moment: its cost is the
page's again, whatever the moment (bench/search_bench.py, "Memory over time").

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_facts_created_at", "facts", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_facts_created_at", table_name="facts")
