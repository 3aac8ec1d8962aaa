"""Tokens the memory signed, the activity record, and one-time console sign-in codes.

- `tokens`: every token this memory signs (jti, subject, label, who issued it, when it
  was issued and expires, and whether and by whom it was revoked); never the token.
  A row with no subject is a jti that an admin revoked without this memory having
  issued it (a token from an identity provider). `meta.token_revocations` changes
  with every revocation, so each server's cached list knows when to read it again.
- `activity`: who changed what, written in the change's own transaction: when,
  which subject, through which front end, and what (fact id and path, tag, policy
  line, jti), never a fact's content.
- `signin_codes`: the codes `embornal ui` prints in a sign-in link, kept as digests,
  valid five minutes and once.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REVOCATIONS_KEY = "token_revocations"


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("jti", sa.String(), primary_key=True),
        sa.Column("subject", sa.String(), nullable=True),
        sa.Column("label", sa.String(), nullable=True),
        sa.Column("issued_by", sa.String(), nullable=True),
        sa.Column("issued_at", sa.Float(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("revoked_by", sa.String(), nullable=True),
    )
    op.create_index("ix_tokens_subject", "tokens", ["subject", "issued_at"])
    op.create_index("ix_tokens_expires_at", "tokens", ["expires_at"])
    op.create_table(
        "activity",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("via", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("fact_id", sa.Integer(), nullable=True),
        sa.Column("supersedes_id", sa.Integer(), nullable=True),
        sa.Column("path", sa.String(), nullable=True),
        sa.Column("tag", sa.String(), nullable=True),
        sa.Column("policy", sa.String(), nullable=True),
        sa.Column("jti", sa.String(), nullable=True),
        sa.Column("note", sa.String(), nullable=True),
    )
    # A subject's own changes newest first, and a fact's changes (its own entries, and
    # the supersede that replaced it: partial, since most entries replace nothing).
    # Each index costs every change a page more to write: pruning needs none (entries
    # are appended in time order: the oldest are the lowest ids).
    op.create_index("ix_activity_subject", "activity", ["subject", "id"])
    op.create_index("ix_activity_fact_id", "activity", ["fact_id"])
    op.create_index(
        "ix_activity_supersedes_id",
        "activity",
        ["supersedes_id"],
        sqlite_where=sa.text("supersedes_id IS NOT NULL"),
        postgresql_where=sa.text("supersedes_id IS NOT NULL"),
    )
    op.create_table(
        "signin_codes",
        sa.Column("code_hash", sa.String(), primary_key=True),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("used_at", sa.Float(), nullable=True),
    )
    meta = sa.table("meta", sa.column("key"), sa.column("value"))
    op.bulk_insert(meta, [{"key": REVOCATIONS_KEY, "value": "0"}])


def downgrade() -> None:
    op.execute(f"DELETE FROM meta WHERE key = '{REVOCATIONS_KEY}'")
    op.drop_table("signin_codes")
    op.drop_index("ix_activity_supersedes_id", table_name="activity")
    op.drop_index("ix_activity_fact_id", table_name="activity")
    op.drop_index("ix_activity_subject", table_name="activity")
    op.drop_table("activity")
    op.drop_index("ix_tokens_expires_at", table_name="tokens")
    op.drop_index("ix_tokens_subject", table_name="tokens")
    op.drop_table("tokens")
