"""A random key per database that signs pagination cursors.

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-02

Kept in `meta` rather than in a process or a file, so every process and replica
on one database accepts the cursors any of them gave out; made here, in the
migration's write transaction, so two servers starting at once cannot each make
their own. It is not a secret a backup must leave out: whoever can read the
database file can read every fact, which is more than any cursor opens.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURSOR_KEY = "cursor_key"

meta = sa.table("meta", sa.column("key"), sa.column("value"))


def upgrade() -> None:
    op.execute(meta.delete().where(meta.c.key == CURSOR_KEY))
    op.bulk_insert(meta, [{"key": CURSOR_KEY, "value": secrets.token_hex(32)}])


def downgrade() -> None:
    op.execute(meta.delete().where(meta.c.key == CURSOR_KEY))
