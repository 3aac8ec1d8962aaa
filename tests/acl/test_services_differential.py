"""Differential test of changes: what the services let a subject write, delete and
tag, against Casbin's enforce() and against the SPEC's rule written out.

Each example draws a world as tests/acl/test_acl_differential.py does (tag rules
that try to allow write or tag included), then, for every subject that is not a
role, tries through the real services to store a fact at every node, delete
every fact and set a tag on every node, each in a savepoint rolled back after.
A store must succeed exactly when a path rule allows `write` on the fact as it
would be and on its node, with no deny matching either; a delete when the fact
is readable and `delete` is allowed on it (by path or tag rule); a path tag when
`tag` is allowed on the node as it is and as it would be, and no fact beneath that
the subject cannot read would change its effective tags.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine

from app.acl.enforcer import AccessControl
from app.acl.model import Resource
from app.db.engine import WRITE, write_transaction
from app.errors import Forbidden, NotFound
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services.context import Context
from app.services.facts import NewFact
from tests.acl.test_differential import (
    FACT_TAG_KEYS,
    SUBJECTS,
    TAG_VALUES,
    Decisions,
    World,
    expected_tags,
    granted,
    load,
    node_tags,
    role_names,
    tag_dicts,
    worlds,
)

OK = "ok"


def here_own(world: World, node: str) -> dict[str, str]:
    """The node's own path tags (node_tags gives the inherited ones too)."""
    return dict(world.path_tags.get(node, {}))


def outcome(conn: Connection, call: Callable[..., Any], *args: Any) -> str:
    """Run `call(conn, *args)` in a savepoint, always rolled back; name how it ended."""
    savepoint = conn.begin_nested()
    try:
        call(conn, *args)
        return OK
    except Forbidden:
        return "403"
    except NotFound:
        return "404"
    finally:
        savepoint.rollback()


@pytest.mark.long
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    world=worlds(),
    store_tags=tag_dicts(FACT_TAG_KEYS),
    new_tag=st.sampled_from([(k, v) for k in ("visibility", "team") for v in TAG_VALUES[k]]),
)
def test_changes_equal_enforce(
    engine: Engine,
    control: AccessControl,
    world: World,
    store_tags: dict[str, str],
    new_tag: tuple[str, str],
) -> None:
    with write_transaction(engine) as conn:
        load(conn, world)
    roles = role_names(world)
    fact_tags = {i: expected_tags(world, f) for i, f in enumerate(world.facts, start=1)}
    with engine.connect() as conn:
        conn.execution_options(sqlite_begin=WRITE)
        with conn.begin() as tx:
            decide = Decisions(control.current(conn))

            def enforce(subject: str, action: str, path: str, tags: dict[str, str]) -> bool:
                obj = Resource(path, tags).encode()
                first = (subject, obj, action) not in decide.known
                decision = decide(subject, obj, action)
                if first:  # the model and the rule written out agree (also proven on reads)
                    assert decision == granted(world, subject, action, path, tags)
                return decision

            for subject in SUBJECTS:
                if subject in roles:
                    continue  # refused at the door; see test_acl_differential
                ctx = Context(subject=subject, access=control.for_subject(conn, subject))

                def node_visible(node: str, here: dict[str, str], subject: str = subject) -> bool:
                    """A node exists for the subject: it may write or tag there, or it
                    reads a fact at or beneath it."""
                    return (
                        enforce(subject, "write", node, here)
                        or enforce(subject, "tag", node, here)
                        or any(
                            (f.path == node or f.path.startswith(node + "/"))
                            and enforce(subject, "read", f.path, fact_tags[i])
                            for i, f in enumerate(world.facts, start=1)
                        )
                    )

                def retags_unreadable(
                    node: str, own: dict[str, str], subject: str = subject
                ) -> bool:
                    """Whether giving `node` the path tags `own` changes the effective
                    tags of a fact at or beneath it that the subject cannot read."""
                    after = replace(world, path_tags={**world.path_tags, node: own})
                    return any(
                        (f.path == node or f.path.startswith(node + "/"))
                        and not enforce(subject, "read", f.path, fact_tags[i])
                        and expected_tags(after, f) != fact_tags[i]
                        for i, f in enumerate(world.facts, start=1)
                    )

                for node in world.paths[1:]:
                    here = node_tags(world, node)
                    as_stored = {**here, **store_tags, "owner": subject}
                    want = enforce(subject, "write", node, as_stored) and enforce(
                        subject, "write", node, here
                    )
                    probe = NewFact(node, "probe", store_tags)
                    got = outcome(conn, fact_service.store_fact, ctx, probe)
                    assert got == (OK if want else "403"), (subject, "store", node, store_tags)

                for fact_id, fact in enumerate(world.facts, start=1):
                    tags = fact_tags[fact_id]
                    readable = enforce(subject, "read", fact.path, tags)
                    deletable = enforce(subject, "delete", fact.path, tags)
                    want_delete = "404" if not readable else OK if deletable else "403"
                    got = outcome(conn, fact_service.delete_fact, ctx, fact_id)
                    assert got == want_delete, (subject, "delete", fact_id, fact.path, tags)

                key, value = new_tag
                for node in world.paths[1:]:
                    here = node_tags(world, node)
                    want_tag = enforce(subject, "tag", node, here) and enforce(
                        subject, "tag", node, {**here, key: value}
                    )
                    # Never a change to the tags of a fact beneath it cannot read.
                    want_tag = want_tag and not retags_unreadable(
                        node, {**here_own(world, node), key: value}
                    )
                    got = outcome(conn, path_service.set_path_tags, ctx, node, {key: value})
                    # Refused: 404 when the node is hidden from the subject, else 403.
                    refused = "403" if node_visible(node, here) else "404"
                    assert got == (OK if want_tag else refused), (subject, "tag", node, here)

                # Removing a path tag: `tag` on the node, and no change to the tags of a
                # fact beneath that the subject cannot read (a removal can publish too).
                for node in world.paths[1:]:
                    own = here_own(world, node)
                    for dropped in own:
                        here = node_tags(world, node)
                        left = {k: v for k, v in own.items() if k != dropped}
                        want_remove = enforce(subject, "tag", node, here) and not retags_unreadable(
                            node, left
                        )
                        got = outcome(conn, path_service.remove_path_tag, ctx, node, dropped)
                        refused = "403" if node_visible(node, here) else "404"
                        want = OK if want_remove else refused
                        assert got == want, (subject, "untag", node, dropped, here)
            tx.rollback()
