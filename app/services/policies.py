"""Policy lines in casbin_rule: list, add, remove.

Over REST, MCP and the console a subject in the `admin` role manages them (`ctx`). The
command line passes no context (`ctx=None`): it acts on the database file, and
whoever can write that file owns the memory whatever its policies say; it is the way
back for an owner who locked themself out (SPEC: Access control). Neither may remove
the last line that gives anyone the admin role.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, and_, delete, insert, or_, select

from app.acl.enforcer import admins
from app.acl.model import ADMIN, EVERYONE, PolicyLine, parse_policy_line
from app.db.tables import casbin_rule, facts
from app.errors import Conflict, Forbidden, InvalidInput, NotFound, invalid
from app.services import tokens as token_service
from app.services.context import Context

_COLUMNS = [casbin_rule.c.v0, casbin_rule.c.v1, casbin_rule.c.v2, casbin_rule.c.v3]


def _require_admin(ctx: Context | None) -> None:
    """Refuse a subject outside the admin role; None is the owner of the database file."""
    if ctx is not None and not ctx.access.is_admin:
        raise Forbidden("managing policies needs the admin role")


def _match(line: PolicyLine) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [casbin_rule.c.ptype == line.ptype]
    conditions += [column == value for column, value in zip(_COLUMNS, line.values, strict=False)]
    return conditions


def list_policies(conn: Connection, ctx: Context | None) -> list[PolicyLine]:
    _require_admin(ctx)
    rows = conn.execute(select(casbin_rule).order_by(casbin_rule.c.ptype.desc(), casbin_rule.c.id))
    lines = []
    for row in rows:
        values = tuple(v for v in (row.v0, row.v1, row.v2, row.v3, row.v4, row.v5) if v)
        lines.append(PolicyLine(row.ptype, values))
    return lines


# The subject the command line acts as (app.runtime.LOCAL_SUBJECT): never a role,
# or the owner at the console would lose the memory to whoever holds the role.
LOCAL_SUBJECT = "default"


def role_names(conn: Connection) -> set[str]:
    """Every role: the second field of a g line, plus everyone and admin."""
    named = conn.execute(select(casbin_rule.c.v1).where(casbin_rule.c.ptype == "g")).scalars()
    return {EVERYONE, ADMIN, *named}


def refuse_role_name(conn: Connection, subject: str) -> None:
    """InvalidInput (about the field `subject`) when `subject` is a role name: no token
    may be made for it."""
    if subject in role_names(conn):
        raise invalid(
            "subject",
            f"{subject!r} is a role name, not a subject: subjects and roles are separate "
            "namespaces, and a token for it would be refused",
        )


def subject_use(conn: Connection, name: str, *, now: float) -> str | None:
    """Why `name` counts as a subject (a line, a fact or a live token naming it as
    one), or None. `now` is the wall clock's time, which tokens expire on.

    Only meaningful for a name that is not a role: a role is also the first field
    of p lines (its rights) and of g lines (a role hierarchy).
    """
    if name == LOCAL_SUBJECT:
        return "the command line acts as it"
    if conn.execute(select(facts.c.id).where(facts.c.owner == name).limit(1)).first():
        return "it owns facts"
    # Made a role, its tokens would be refused (401) with nothing to say why.
    if token_service.holds_live_token(conn, name, now=now):
        return "it holds a token this memory issued that is neither revoked nor expired"
    named = _first_line_naming(conn, name)
    if named is None:
        return None
    if named.ptype == "p":
        return "a p line gives it rights; to make it a role, add the g line before its p lines"
    return f"it is a member of {named.v1!r}"


def _first_line_naming(conn: Connection, name: str) -> Row[Any, Any] | None:
    """A p or g line whose first field is `name` (its ptype and v1), or None."""
    return conn.execute(
        select(casbin_rule.c.ptype, casbin_rule.c.v1)
        .where(
            casbin_rule.c.v0 == name, or_(casbin_rule.c.ptype == "p", casbin_rule.c.ptype == "g")
        )
        .limit(1)
    ).first()


def is_named_by_a_policy(conn: Connection, name: str) -> bool:
    """True when a p or g line names `name` as its subject (the first field)."""
    return _first_line_naming(conn, name) is not None


def check_role_collision(conn: Connection, line: PolicyLine, *, now: float) -> None:
    """Refuse a `g, MEMBER, ROLE` line that would make a subject's name a role.

    The rule: ROLE must already be a role (the second field of a g line, or
    `everyone`/`admin`), or else not be in use as a subject. A name that is not
    a role is in use as a subject when it is `default` (the command line's
    subject), owns a fact, holds a token this memory issued that is neither revoked
    nor expired at `now`, is the first field of a p line, or is the first field
    of a g line. Otherwise the subject would be locked out (its tokens are refused,
    see app.acl.enforcer) and its rights, its own facts included, would pass to
    every member of the new role. MEMBER may be anything: a role there makes a
    role hierarchy (`g, team, staff` where team is a role), which changes no name's
    namespace.

    To create a role and give it rights, add its first g line before its p lines
    (a p line for a name no g line names yet reads as a subject's rights).
    """
    if line.ptype != "g":
        return
    role = line.values[1]
    if role in role_names(conn):
        return
    why = subject_use(conn, role, now=now)
    if why is not None:
        raise InvalidInput(
            f"{role!r} is a subject ({why}), so it cannot be made a role; "
            "subjects and roles are separate namespaces"
        )


def add_policy(
    conn: Connection, ctx: Context | None, text: str, *, now: float | None = None
) -> PolicyLine:
    """Add a line (see check_role_collision for the g lines refused). `now`, the wall
    clock's time unless given, tells which recorded tokens are live."""
    _require_admin(ctx)
    line = parse_policy_line(text)
    check_role_collision(conn, line, now=time.time() if now is None else now)
    if conn.execute(select(casbin_rule.c.id).where(and_(*_match(line)))).first():
        raise Conflict(f"policy already present: {line}")
    values = dict(zip(("v0", "v1", "v2", "v3"), line.values, strict=False))
    conn.execute(insert(casbin_rule).values(ptype=line.ptype, **values))
    return line


def _removable(conn: Connection, ctx: Context | None, text: str) -> PolicyLine:
    """The line parsed, or why it may not be removed (Forbidden without the admin
    role, Conflict for the last line giving anyone admin)."""
    _require_admin(ctx)
    line = parse_policy_line(text)
    if line.ptype == "g":
        _keep_an_admin(conn, line)
    return line


def remove_policy(conn: Connection, ctx: Context | None, text: str) -> PolicyLine:
    line = _removable(conn, ctx, text)
    if not conn.execute(delete(casbin_rule).where(and_(*_match(line)))).rowcount:
        raise NotFound(f"no such policy: {line}")
    return line


def find_policy(conn: Connection, ctx: Context, text: str) -> PolicyLine:
    """The line as `remove_policy` would remove it, or its refusal (`_removable`, and
    NotFound when absent); nothing is written."""
    line = _removable(conn, ctx, text)
    if not conn.execute(select(casbin_rule.c.id).where(and_(*_match(line)))).first():
        raise NotFound(f"no such policy: {line}")
    return line


def _keep_an_admin(conn: Connection, removed: PolicyLine) -> None:
    """Conflict when removing `removed` would leave no one with the admin role.

    Only a g line's removal can: adding a line never takes the role from anyone (a g
    line that would turn an admin's name into a role is refused as a collision), and
    no p line grants or denies a role. A memory that had no admin already (a hand edit)
    is let be: the command line is on its way to fixing it.
    """
    links = [
        (member, role)
        for member, role in conn.execute(
            select(casbin_rule.c.v0, casbin_rule.c.v1).where(casbin_rule.c.ptype == "g")
        )
    ]
    after = [link for link in links if link != removed.values]
    if admins(links) and not admins(after, roles=(role for _member, role in links)):
        raise Conflict(
            f"{removed} is the last line that gives anyone the {ADMIN!r} role; removing it "
            f"would lock every token out of managing the memory: add another admin first "
            f'(e.g. "g, NAME, {ADMIN}")'
        )
