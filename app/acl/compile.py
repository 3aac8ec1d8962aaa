"""Compile a subject's read permissions into ONE SQL WHERE fragment over facts.

A read never asks Casbin fact by fact (seed: "A read does not test each fact").
The rules that can apply to a subject -- its own, its roles', and those of
`everyone` and its roles -- become: (any allow matches) AND NOT (any deny
matches). Each side is compiled as a whole, so that its cost per fact stays
flat however many rules there are:

- all node and subtree objects become one `path_id IN (...)` over paths and the
  closure table: a list SQLite builds once per query and probes through a
  bloom filter;
- all tag objects become one correlated EXISTS over the fact's own tags (a
  probe of fact_tags' primary key), and, for tags a fact inherits, one list of
  nodes per key whose nearest tag matches; the fact's own key is probed only
  when its node is on that list.

Measured with bench/acl_bench.py (10k facts, 50 lines): the per-fact probe of
own tags is the cost that remains.

The meaning is that of `ObjectPattern.matches` over the effective tags; tests
check the fragment against Casbin's enforce().
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Select,
    and_,
    exists,
    false,
    not_,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.sql.elements import KeyedColumnElement

from app.acl.model import ObjectPattern
from app.db.tables import effective_path_tags, fact_tags, path_closure, paths
from app.rules import OWNER_KEY

# Built once: an alias's column collection is costly to make on every request. Each
# subquery names what it correlates, so sharing them between subqueries is safe.
_OWN = fact_tags.alias("own")
_OWN_KEY = fact_tags.alias("own_key")
_ROOT = paths.alias("root")


def _node_ids(nodes: set[str], subtrees: set[str]) -> Select[tuple[int]] | CompoundSelect:
    """Ids of the nodes named in `nodes` and of every node in `subtrees` (roots included)."""
    parts: list[Select[tuple[int]]] = []
    if subtrees:
        # The closure table lists each node under each of its ancestors, itself included.
        parts.append(
            select(path_closure.c.descendant_id)
            .join(_ROOT, _ROOT.c.id == path_closure.c.ancestor_id)
            .where(_ROOT.c.path.in_(sorted(subtrees)))
            .correlate(None)
        )
    if nodes:
        parts.append(select(paths.c.id).where(paths.c.path.in_(sorted(nodes))).correlate(None))
    return parts[0] if len(parts) == 1 else union_all(*parts)


def any_object(
    patterns: Iterable[ObjectPattern],
    fact_id: KeyedColumnElement[int],
    path_id: KeyedColumnElement[int],
) -> ColumnElement[bool]:
    """True for the facts (fact_id, path_id) that at least one of `patterns` covers."""
    nodes: set[str] = set()
    subtrees: set[str] = set()
    values: dict[str, set[str]] = defaultdict(set)
    for pattern in patterns:
        if pattern.kind == "subtree" and pattern.path == "/":
            return true()
        if pattern.kind == "node":
            nodes.add(pattern.path)
        elif pattern.kind == "subtree":
            subtrees.add(pattern.path)
        else:
            values[pattern.key].add(pattern.value)
    terms: list[ColumnElement[bool]] = []
    if nodes or subtrees:
        # `path_id + 0`: keeps SQLite from driving the query by the path_id index.
        # With no statistics it did, fetching every fact in the allowed nodes and
        # sorting them for a page of 50 (0.27 ms instead of 0.08 at 10k facts).
        terms.append((path_id + 0).in_(_node_ids(nodes, subtrees)))
    if values:
        # The fact's own tags: one probe of fact_tags' primary key (fact_id, key).
        pairs = [
            and_(_OWN.c.key == key, _OWN.c.value.in_(sorted(values[key]))) for key in sorted(values)
        ]
        own = exists().where(_OWN.c.fact_id == fact_id, or_(*pairs))
        terms.append(own.correlate_except(_OWN))
    for key in sorted(values):
        if key == OWNER_KEY:
            continue  # the memory writes an owner tag on every fact: one never inherits it
        inherited = (path_id + 0).in_(
            select(effective_path_tags.c.path_id)
            .where(
                effective_path_tags.c.key == key,
                effective_path_tags.c.value.in_(sorted(values[key])),
            )
            .correlate(None)
        )
        # Cheap node-list test first; the key probe only runs for nodes that match.
        has_key = exists().where(_OWN_KEY.c.fact_id == fact_id, _OWN_KEY.c.key == key)
        terms.append(and_(inherited, not_(has_key.correlate_except(_OWN_KEY))))
    return or_(*terms) if terms else false()


def object_predicate(
    pattern: ObjectPattern,
    fact_id: KeyedColumnElement[int],
    path_id: KeyedColumnElement[int],
) -> ColumnElement[bool]:
    """The SQL meaning of one policy object for the fact with columns (fact_id, path_id)."""
    return any_object([pattern], fact_id, path_id)


def read_predicate(
    rules: Iterable[tuple[ObjectPattern, str]],
    fact_id: KeyedColumnElement[int],
    path_id: KeyedColumnElement[int],
) -> ColumnElement[bool]:
    """(any allow) AND NOT (any deny), from (object, effect) pairs of `read` rules."""
    allows: list[ObjectPattern] = []
    denies: list[ObjectPattern] = []
    for pattern, effect in set(rules):
        (denies if effect == "deny" else allows).append(pattern)
    if not allows:
        return false()
    allowed = any_object(allows, fact_id, path_id)
    if not denies:
        return allowed
    # SQLite tests AND terms in order: denied nodes first (a list lookup), so that a
    # fact under one costs no probe of its tags.
    deny_nodes = [p for p in denies if p.kind != "tag"]
    deny_tags = [p for p in denies if p.kind == "tag"]
    terms = [not_(any_object(deny_nodes, fact_id, path_id))] if deny_nodes else []
    terms.append(allowed)
    if deny_tags:
        terms.append(not_(any_object(deny_tags, fact_id, path_id)))
    return and_(*terms)
