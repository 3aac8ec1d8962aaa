"""Policy lines in casbin_rule: list, add, remove (role admin only)."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection, and_, delete, insert, select

from app.acl.model import PolicyLine, parse_policy_line
from app.db.tables import casbin_rule
from app.errors import Conflict, Forbidden, NotFound
from app.services.context import Context

_COLUMNS = [casbin_rule.c.v0, casbin_rule.c.v1, casbin_rule.c.v2, casbin_rule.c.v3]


def _require_admin(ctx: Context) -> None:
    if not ctx.access.is_admin:
        raise Forbidden("managing policies needs the admin role")


def _match(line: PolicyLine) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [casbin_rule.c.ptype == line.ptype]
    conditions += [column == value for column, value in zip(_COLUMNS, line.values, strict=False)]
    return conditions


def list_policies(conn: Connection, ctx: Context) -> list[PolicyLine]:
    _require_admin(ctx)
    rows = conn.execute(select(casbin_rule).order_by(casbin_rule.c.ptype.desc(), casbin_rule.c.id))
    lines = []
    for row in rows:
        values = tuple(v for v in (row.v0, row.v1, row.v2, row.v3, row.v4, row.v5) if v)
        lines.append(PolicyLine(row.ptype, values))
    return lines


def add_policy(conn: Connection, ctx: Context, text: str) -> PolicyLine:
    _require_admin(ctx)
    line = parse_policy_line(text)
    if conn.execute(select(casbin_rule.c.id).where(and_(*_match(line)))).first():
        raise Conflict(f"policy already present: {line}")
    values = dict(zip(("v0", "v1", "v2", "v3"), line.values, strict=False))
    conn.execute(insert(casbin_rule).values(ptype=line.ptype, **values))
    return line


def remove_policy(conn: Connection, ctx: Context, text: str) -> PolicyLine:
    _require_admin(ctx)
    line = parse_policy_line(text)
    if not conn.execute(delete(casbin_rule).where(and_(*_match(line)))).rowcount:
        raise NotFound(f"no such policy: {line}")
    return line
