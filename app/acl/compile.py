"""Compile a subject's read permissions into ONE SQL WHERE fragment over facts.

A read never asks Casbin fact by fact (seed: "A read does not test each fact").
The rules that can apply to a subject -- its own, its roles', and those of
`everyone` and its roles -- become: (any allow matches) AND NOT (any deny
matches). Each rule's object becomes a predicate with the same meaning as
`ObjectPattern.matches`; tests check the fragment against Casbin's enforce().
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import ColumnElement, and_, exists, false, not_, or_, select, true
from sqlalchemy.sql.elements import KeyedColumnElement

from app.acl.model import ObjectPattern
from app.db.tables import effective_path_tags, fact_tags, paths


def _path_rows(pattern: ObjectPattern) -> ColumnElement[bool]:
    if pattern.kind == "node":
        return paths.c.path == pattern.path
    # '/' sorts just below '0', so [p + '/', p + '0') is exactly the strict subtree:
    # no segment character lies between them. A range scan on the unique index.
    return or_(
        paths.c.path == pattern.path,
        and_(paths.c.path >= pattern.path + "/", paths.c.path < pattern.path + "0"),
    )


def object_predicate(
    pattern: ObjectPattern,
    fact_id: KeyedColumnElement[int],
    path_id: KeyedColumnElement[int],
) -> ColumnElement[bool]:
    """The SQL meaning of one policy object for the fact with columns (fact_id, path_id)."""
    if pattern.kind == "subtree" and pattern.path == "/":
        return true()
    if pattern.kind in ("node", "subtree"):
        return path_id.in_(select(paths.c.id).where(_path_rows(pattern)))
    own = fact_tags.alias("own")
    has_own_value = exists().where(
        own.c.fact_id == fact_id, own.c.key == pattern.key, own.c.value == pattern.value
    )
    own_key = fact_tags.alias("own_key")
    has_own_key = exists().where(own_key.c.fact_id == fact_id, own_key.c.key == pattern.key)
    inherited = path_id.in_(
        select(effective_path_tags.c.path_id).where(
            effective_path_tags.c.key == pattern.key,
            effective_path_tags.c.value == pattern.value,
        )
    )
    if pattern.key == "owner":
        # The memory writes an owner tag on every fact, so an inherited one never counts.
        return has_own_value
    return or_(has_own_value, and_(not_(has_own_key), inherited))


def read_predicate(
    rules: Iterable[tuple[ObjectPattern, str]],
    fact_id: KeyedColumnElement[int],
    path_id: KeyedColumnElement[int],
) -> ColumnElement[bool]:
    """(any allow) AND NOT (any deny), from (object, effect) pairs of `read` rules."""
    allows: list[ColumnElement[bool]] = []
    denies: list[ColumnElement[bool]] = []
    for pattern, effect in sorted(set(rules), key=lambda r: (r[1], repr(r[0]))):
        predicate = object_predicate(pattern, fact_id, path_id)
        (denies if effect == "deny" else allows).append(predicate)
    if not allows:
        return false()
    allowed = or_(*allows)
    if not denies:
        return allowed
    return and_(allowed, not_(or_(*denies)))
