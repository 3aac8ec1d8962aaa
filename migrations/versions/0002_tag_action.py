"""The `tag` action: setting or removing path tags needs it; give it to `default`.

Path tags change what others see beneath a node (visibility=public publishes a
subtree), so they no longer ride on `write`. A new memory and an upgraded one
alike keep the local subject able to tag its whole tree.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TAG_POLICY = ("p", "default", "path:/*", "tag", "allow")

_rules = sa.table(
    "casbin_rule",
    sa.column("ptype"),
    sa.column("v0"),
    sa.column("v1"),
    sa.column("v2"),
    sa.column("v3"),
)


def _match() -> sa.ColumnElement[bool]:
    ptype, v0, v1, v2, v3 = TAG_POLICY
    return sa.and_(
        _rules.c.ptype == ptype,
        _rules.c.v0 == v0,
        _rules.c.v1 == v1,
        _rules.c.v2 == v2,
        _rules.c.v3 == v3,
    )


def upgrade() -> None:
    conn = op.get_bind()
    # Added if absent: an owner may have written the line by hand already.
    if conn.execute(sa.select(sa.func.count()).select_from(_rules).where(_match())).scalar():
        return
    ptype, v0, v1, v2, v3 = TAG_POLICY
    op.bulk_insert(_rules, [{"ptype": ptype, "v0": v0, "v1": v1, "v2": v2, "v3": v3}])


def downgrade() -> None:
    # Only the line this revision adds; other `tag` lines are the owner's, and code
    # of revision 0001 never asks for `tag`, so they grant nothing there.
    op.execute(_rules.delete().where(_match()))
