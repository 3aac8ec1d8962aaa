"""The two filters every fact query is built from."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, select

from app.db.tables import facts
from app.services.context import Context


def readable(ctx: Context) -> Any:
    """Facts the subject may read: the compiled ACL fragment."""
    return ctx.access.read_clause(facts.c.id, facts.c.path_id)


# Built once: the read fragment is cached per column object, and a fresh alias on
# every call would make every request compile it again.
SUCCESSOR = facts.alias("successor")


def current_only() -> Any:
    """Not deleted and not superseded: what default listings, counts and searches show."""
    return and_(
        facts.c.deleted_at.is_(None),
        ~select(SUCCESSOR.c.id).where(SUCCESSOR.c.supersedes_id == facts.c.id).exists(),
    )


def visible_current(ctx: Context) -> Any:
    return and_(current_only(), readable(ctx))
