"""The tree: creating nodes, their tags, and what a subject sees of a node."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, delete, func, select

from app.acl.model import Resource
from app.db.dialects import backend
from app.db.tables import (
    ROOT_PATH_ID,
    effective_fact_tags,
    effective_path_tags,
    facts,
    path_closure,
    path_tags,
    paths,
)
from app.errors import Forbidden, NotFound, invalid
from app.rules import MAX_PATH_TAGS
from app.services.context import Context
from app.services.validation import check_path_tags, fold_path
from app.services.visibility import current_for_scans, readable, visible_current


def find_path_id(conn: Connection, path: str) -> int | None:
    return conn.execute(select(paths.c.id).where(paths.c.path == path)).scalar()


def ensure_path(conn: Connection, path: str, now: float) -> int:
    """Return the node of `path`, creating it and each missing ancestor."""
    existing = find_path_id(conn, path)
    if existing is not None:
        return existing
    db = backend(conn)
    db.lock_tree(conn)
    parent_id, current = ROOT_PATH_ID, ""
    for segment in path.strip("/").split("/"):
        current = f"{current}/{segment}"
        node = find_path_id(conn, current)
        if node is None:
            # Another writer (another replica) may make the same node meanwhile: then
            # this insert does nothing and the next lookup finds that writer's node.
            node = conn.execute(
                db.insert(paths)
                .values(parent_id=parent_id, name=segment, path=current, created_at=now)
                .on_conflict_do_nothing(index_elements=["path"])
                .returning(paths.c.id)
            ).scalar()
            if node is None:
                node = find_path_id(conn, current)
        assert node is not None
        parent_id = node
    return parent_id


def own_path_tags(conn: Connection, path_id: int) -> dict[str, str]:
    rows = conn.execute(
        select(path_tags.c.key, path_tags.c.value).where(path_tags.c.path_id == path_id)
    )
    return {key: value for key, value in rows}


def effective_tags_of_path(conn: Connection, path_id: int) -> dict[str, str]:
    rows = conn.execute(
        select(effective_path_tags.c.key, effective_path_tags.c.value).where(
            effective_path_tags.c.path_id == path_id
        )
    )
    return {key: value for key, value in rows}


def path_resource(conn: Connection, path: str) -> Resource:
    """A node as the enforcer sees it; a node not yet made inherits from its ancestors."""
    probe = path
    while True:
        node = find_path_id(conn, probe)
        if node is not None:
            return Resource(path, effective_tags_of_path(conn, node))
        probe = probe.rsplit("/", 1)[0] or "/"


def _subtree_fact_count(conn: Connection, ctx: Context, path_ids: list[int]) -> dict[int, int]:
    if not path_ids:
        return {}
    rows = conn.execute(
        select(path_closure.c.ancestor_id, func.count(facts.c.id))
        .select_from(path_closure.join(facts, facts.c.path_id == path_closure.c.descendant_id))
        # A subtree count visits every fact beneath: the scan form of "current".
        .where(path_closure.c.ancestor_id.in_(path_ids), readable(ctx), current_for_scans())
        .group_by(path_closure.c.ancestor_id)
    )
    return {ancestor: count for ancestor, count in rows}


def _node_fact_count(conn: Connection, ctx: Context, path_id: int) -> int:
    return conn.execute(
        select(func.count())
        .select_from(facts)
        .where(facts.c.path_id == path_id, visible_current(ctx))
    ).scalar_one()


def _visible_node(conn: Connection, ctx: Context, path: str) -> int:
    """The node's id if the subject may see it, else NotFound (as if it did not exist)."""
    node = visible_nodes(conn, ctx, [path]).get(path)
    if node is None:
        raise NotFound(f"path {path} not found")
    return node


def visible_nodes(conn: Connection, ctx: Context, wanted: Iterable[str]) -> dict[str, int]:
    """The nodes among `wanted` (folded paths) that the subject may see, by path.

    A node is visible when its subtree holds a fact the subject may read, or the
    subject may write or tag there; otherwise its very name could leak (think
    /secrets/...).
    One query for any number of paths (a page of facts' links), plus an enforcer
    check for each node with no visible fact beneath.
    """
    found = dict(
        conn.execute(
            select(paths.c.path, paths.c.id).where(paths.c.path.in_(sorted(set(wanted))))
        ).all()
    )
    with_facts = _subtree_fact_count(conn, ctx, [i for i in found.values() if i != ROOT_PATH_ID])
    return {
        path: node
        for path, node in found.items()
        if node == ROOT_PATH_ID
        or with_facts.get(node, 0) > 0
        or _may_change(ctx, path_resource(conn, path))
    }


def _may_change(ctx: Context, node: Resource) -> bool:
    return ctx.access.can("write", node) or ctx.access.can("tag", node)


@dataclass(frozen=True, slots=True)
class Child:
    path: str
    fact_count: int  # current facts in the child's subtree that the reader sees


@dataclass(frozen=True, slots=True)
class Node:
    """A node one level deep, as its reader sees it (app.schemas.paths.PathOut)."""

    path: str
    tags: dict[str, str]  # its own
    effective_tags: dict[str, str]  # own and inherited, nearest wins
    children: list[Child]
    fact_count: int  # current facts at the node the reader sees
    subtree_fact_count: int


def describe_path(conn: Connection, ctx: Context, raw_path: str) -> Node:
    """A node one level deep: its tags, its visible children and fact counts."""
    path = fold_path(raw_path)
    node = _visible_node(conn, ctx, path)
    child_rows = conn.execute(
        select(paths.c.id, paths.c.path).where(paths.c.parent_id == node).order_by(paths.c.name)
    ).all()
    counts = _subtree_fact_count(conn, ctx, [row.id for row in child_rows])
    children = []
    for row in child_rows:
        count = counts.get(row.id, 0)
        if count == 0 and not _may_change(ctx, path_resource(conn, row.path)):
            continue
        children.append(Child(row.path, count))
    at_node = _node_fact_count(conn, ctx, node)
    return Node(
        path=path,
        tags=own_path_tags(conn, node),
        effective_tags=effective_tags_of_path(conn, node),
        children=children,
        fact_count=at_node,
        # Every fact beneath sits at the node or under exactly one child (hidden children
        # count zero): a second pass over the whole subtree would find the same number.
        subtree_fact_count=at_node + sum(counts.values()),
    )


def _taggable_node(conn: Connection, ctx: Context, path: str, new: dict[str, str]) -> None:
    """Forbidden unless the subject may `tag` the node; NotFound if it may not even see it.

    `tag` is granted by a path rule alone (tags on a node change what others see
    beneath it: visibility=public publishes a subtree). Tag rules deny, asked of
    the node as it is and as it would be with `new`, so a deny on the tag being
    set holds as well as one on the tags the node carries.
    """
    node = path_resource(conn, path)
    after = Resource(path, {**node.tags, **new})
    if ctx.access.can("tag", node) and ctx.access.can("tag", after):
        return
    _visible_node(conn, ctx, path)
    raise Forbidden(f"{ctx.subject} may not change tags at {path}")


def _beneath(node: int) -> Any:
    """Every fact under `node`, deleted ones too: a deleted fact stays readable by id
    (include_deleted) and in its history, so a path tag above it still decides who reads
    it, and a tag change there must not declassify it."""
    return and_(
        path_closure.c.ancestor_id == node,
        path_closure.c.descendant_id == facts.c.path_id,
    )


def _tags_beneath(conn: Connection, node: int, ids: set[int]) -> dict[int, set[tuple[str, str]]]:
    """Effective tags of the facts `ids` under `node`."""
    found: dict[int, set[tuple[str, str]]] = {fact_id: set() for fact_id in ids}
    rows = conn.execute(
        select(
            effective_fact_tags.c.fact_id, effective_fact_tags.c.key, effective_fact_tags.c.value
        )
        .select_from(effective_fact_tags)
        .join(facts, facts.c.id == effective_fact_tags.c.fact_id)
        .join(path_closure, path_closure.c.descendant_id == facts.c.path_id)
        .where(_beneath(node))
    )
    for fact_id, key, value in rows:
        if fact_id in found:
            found[fact_id].add((key, value))
    return found


def _unreadable_tags_beneath(
    conn: Connection, ctx: Context, node: int
) -> dict[int, set[tuple[str, str]]]:
    """Effective tags of the facts under `node` (deleted ones too) that the subject may not
    read."""
    every = select(facts.c.id).select_from(facts, path_closure).where(_beneath(node))
    hidden = set(conn.execute(every).scalars()) - set(
        conn.execute(every.where(readable(ctx))).scalars()
    )
    return _tags_beneath(conn, node, hidden) if hidden else {}


def _refuse_declassifying(
    conn: Connection, ctx: Context, path: str, node: int, before: dict[int, set[tuple[str, str]]]
) -> None:
    """A subject may not change who may read, write or delete a fact it cannot read.

    Called after the change, in its transaction: raising rolls the change back. The
    refusal tells a holder of `tag` that such facts exist (docs/security.md).
    """
    if before and _tags_beneath(conn, node, set(before)) != before:
        raise Forbidden(
            f"{ctx.subject} may not change tags at {path}: they would change the tags of "
            "facts beneath that it may not read"
        )


def refuse_too_many_tags(path: str, own: dict[str, str], new: dict[str, str]) -> None:
    """InvalidInput when setting `new` would leave the node more than MAX_PATH_TAGS own
    tags. Asked of the node's tags after the change, so a node that holds more (set
    before the bound) takes a change only once it is back within it."""
    after = len(own.keys() | new.keys())
    if after > MAX_PATH_TAGS:
        raise invalid(
            "tags",
            f"{path} would carry {after} tags of its own; a node carries at most "
            f"{MAX_PATH_TAGS} (remove some first)",
        )


def _refuse_too_many(conn: Connection, path: str, new: dict[str, str]) -> None:
    node = find_path_id(conn, path)
    refuse_too_many_tags(path, own_path_tags(conn, node) if node is not None else {}, new)


def set_path_tags(conn: Connection, ctx: Context, raw_path: str, tags: dict[str, str]) -> Node:
    """Set (add or replace) tags on a node, creating the node if the subject may tag there."""
    path = fold_path(raw_path)
    checked = check_path_tags(tags)
    _taggable_node(conn, ctx, path, checked)
    _refuse_too_many(conn, path, checked)
    node = ensure_path(conn, path, ctx.clock())
    backend(conn).lock_tree(conn)
    before = _unreadable_tags_beneath(conn, ctx, node)
    for key, value in checked.items():
        stmt = backend(conn).insert(path_tags).values(path_id=node, key=key, value=value)
        conn.execute(
            stmt.on_conflict_do_update(index_elements=["path_id", "key"], set_={"value": value})
        )
    _refuse_declassifying(conn, ctx, path, node, before)
    return describe_path(conn, ctx, path)


def remove_path_tag(conn: Connection, ctx: Context, raw_path: str, key: str) -> None:
    """Remove one tag from a node; needs `tag` there, as setting does."""
    path = fold_path(raw_path)
    _taggable_node(conn, ctx, path, {})
    node = find_path_id(conn, path)
    if node is None:
        raise NotFound(f"path {path} not found")
    backend(conn).lock_tree(conn)
    before = _unreadable_tags_beneath(conn, ctx, node)
    deleted = conn.execute(
        delete(path_tags).where(path_tags.c.path_id == node, path_tags.c.key == key.lower())
    ).rowcount
    if not deleted:
        raise NotFound(f"path {path} has no tag {key!r}")
    _refuse_declassifying(conn, ctx, path, node, before)


def may_tag(conn: Connection, ctx: Context, raw_path: str) -> bool:
    """Whether the subject may set or remove tags at a node (as `_taggable_node` asks)."""
    return ctx.access.can("tag", path_resource(conn, fold_path(raw_path)))


def tag_origins(conn: Connection, ctx: Context, raw_path: str) -> dict[str, str]:
    """For each effective tag of a node, the node that sets it: the node itself or the
    nearest ancestor with that key (nearest wins), named only if the subject sees it."""
    path = fold_path(raw_path)
    _visible_node(conn, ctx, path)
    segments = path.strip("/").split("/") if path != "/" else []
    lineage = ["/"] + ["/" + "/".join(segments[: i + 1]) for i in range(len(segments))]
    seen = visible_nodes(conn, ctx, lineage)
    rows = conn.execute(
        select(paths.c.path, path_tags.c.key)
        .join(path_tags, path_tags.c.path_id == paths.c.id)
        .where(paths.c.path.in_(lineage))
    ).all()
    depth = {p: i for i, p in enumerate(lineage)}
    origins: dict[str, str] = {}
    for node_path, key in sorted(rows, key=lambda row: -depth[row.path]):
        origins.setdefault(key, node_path)
    # A node the subject may not see keeps its name: its tags' origin goes unnamed.
    return {key: node_path for key, node_path in origins.items() if node_path in seen}
