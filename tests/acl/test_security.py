"""Issue 8, sections 1 and 3, through the real services: subjects and roles are
separate namespaces, and a writer cannot grant itself a store or a path tag."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import pytest
from sqlalchemy import func, insert, select

from app.acl.enforcer import SubjectIsRole
from app.auth.tokens import UNAUTHORIZED_MESSAGE
from app.db.engine import write_transaction
from app.db.tables import casbin_rule, facts, path_tags
from app.errors import Forbidden, InvalidInput, NotFound
from app.runtime import Runtime
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services.facts import NewFact
from app.services.paths import Child
from app.usecases.memory import Memory
from tests.conftest import Actor

MakeActor = Callable[..., Actor]


def add(rt: Runtime, *lines: str) -> None:
    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        for line in lines:
            policy_service.add_policy(conn, ctx, line)


def insert_raw(rt: Runtime, *lines: str) -> None:
    """Lines as an older memory or a hand edit may hold them: add_policy refuses these."""
    with write_transaction(rt.engine) as conn:
        for line in lines:
            ptype, *values = [part.strip() for part in line.split(",")]
            conn.execute(
                insert(casbin_rule).values(
                    ptype=ptype, **dict(zip(("v0", "v1", "v2", "v3"), values, strict=False))
                )
            )


def count_facts(rt: Runtime) -> int:
    with rt.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(facts)).scalar_one())


def store(actor: MakeActor, subject: str, path: str, **tags: str) -> dict:
    with actor(subject).tx() as (conn, ctx):
        return fact_service.store_fact(conn, ctx, NewFact(path, f"{subject} at {path}", tags))


# --- subjects and roles ------------------------------------------------------------


@pytest.mark.parametrize("name", ["admin", "everyone", "reader"])
def test_a_subject_named_like_a_role_is_refused_and_the_log_says_why(
    rt: Runtime, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    add(rt, "g, cli, reader", "p, reader, path:/docs/*, read, allow")
    with (
        caplog.at_level(logging.WARNING),
        pytest.raises(SubjectIsRole) as caught,
        Memory(rt).transaction(name),
    ):
        pass
    # The caller hears what every bad token gets; the operator reads the reason.
    assert caught.value.status == 401
    assert caught.value.detail == UNAUTHORIZED_MESSAGE
    assert f"{name!r} is a role name" in caplog.text


def test_a_name_becomes_refused_when_a_g_line_makes_it_a_role(rt: Runtime) -> None:
    with Memory(rt).transaction("staff") as (_conn, ctx):
        assert ctx.access.roles == ["everyone"]
    add(rt, "g, cli, staff")
    with pytest.raises(SubjectIsRole), Memory(rt).transaction("staff"):
        pass
    with Memory(rt).transaction("cli") as (_conn, ctx):
        assert ctx.access.roles == ["everyone", "staff"]


def test_rights_reach_a_subject_only_through_its_lines_and_roles(
    rt: Runtime, actor: MakeActor
) -> None:
    fact = store(actor, "default", "/admin-notes/plan")
    add(rt, "g, cli, reader", "p, reader, path:/admin-notes/*, read, allow")
    with Memory(rt).transaction("cli") as (conn, ctx):
        assert fact_service.get_fact(conn, ctx, fact.id, peek=True).id == fact.id
        assert not ctx.access.is_admin
    with Memory(rt).transaction("mallory") as (conn, ctx), pytest.raises(NotFound):
        fact_service.get_fact(conn, ctx, fact.id, peek=True)


@pytest.mark.parametrize(
    ("setup", "line", "why"),
    [
        ((), "g, bob, default", "the command line acts as it"),
        (("p, carol, path:/c/*, read, allow",), "g, bob, carol", "a p line gives it rights"),
        (("g, carol, staff",), "g, bob, carol", "it is a member of 'staff'"),
    ],
)
def test_a_g_line_that_would_make_a_subject_a_role_is_refused(
    rt: Runtime, setup: tuple[str, ...], line: str, why: str
) -> None:
    add(rt, *setup)
    with (
        Memory(rt).transaction("default", write=True) as (conn, ctx),
        pytest.raises(InvalidInput) as caught,
    ):
        policy_service.add_policy(conn, ctx, line)
    assert why in caught.value.detail and "separate namespaces" in caught.value.detail
    with Memory(rt).transaction("default") as (conn, ctx):
        assert line not in {str(p) for p in policy_service.list_policies(conn, ctx)}


def test_a_fact_owner_cannot_be_made_a_role(rt: Runtime, actor: MakeActor) -> None:
    add(rt, "p, alice, path:/alice/*, write, allow")
    store(actor, "alice", "/alice/diary")
    # Even with its p line gone, alice owns a fact: she is a subject.
    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        policy_service.remove_policy(conn, ctx, "p, alice, path:/alice/*, write, allow")
    with (
        Memory(rt).transaction("default", write=True) as (conn, ctx),
        pytest.raises(InvalidInput, match="owns facts"),
    ):
        policy_service.add_policy(conn, ctx, "g, bob, alice")


def test_a_subject_holding_a_live_token_cannot_be_made_a_role(rt: Runtime) -> None:
    """Made a role, its tokens would be refused (401) with nothing to say why."""
    memory = Memory(rt)
    erin = memory.sign_token("erin", dt.timedelta(hours=1)).record
    fran = memory.sign_token("fran", dt.timedelta(hours=1)).record
    for line in ("g, bob, erin", "g, bob, fran"):
        with (
            Memory(rt).transaction("default", write=True) as (conn, ctx),
            pytest.raises(InvalidInput) as caught,
        ):
            policy_service.add_policy(conn, ctx, line)
        assert "is a subject (it holds a token this memory issued" in caught.value.detail
    # Expired (the clock given, no sleep) or revoked, the token no longer makes one.
    assert erin.expires_at is not None
    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        policy_service.add_policy(conn, ctx, "g, bob, erin", now=erin.expires_at.timestamp())
    memory.revoke_token("default", fran.jti)
    add(rt, "g, bob, fran")


def test_role_hierarchies_and_rights_for_roles_stay_possible(rt: Runtime) -> None:
    add(
        rt,
        "g, alice, team",  # team becomes a role with its first g line...
        "p, team, path:/team/*, read, allow",  # ...then gets rights,
        "g, team, staff",  # ...and a place in a hierarchy,
        "g, bob, team",  # ...and more members.
        "g, staff, admin",
        "g, newrole, everyone",  # a name nobody uses yet may become a member of a role
    )
    with Memory(rt).transaction("alice") as (_conn, ctx):
        assert ctx.access.roles == ["admin", "everyone", "staff", "team"]


def test_a_g_line_naming_one_name_twice_is_refused(rt: Runtime) -> None:
    with (
        Memory(rt).transaction("default", write=True) as (conn, ctx),
        pytest.raises(InvalidInput, match="to itself"),
    ):
        policy_service.add_policy(conn, ctx, "g, team, team")


# --- what a path rule and a tag rule grant ------------------------------------------


def test_a_tag_rule_cannot_be_added_to_allow_write_or_tag(rt: Runtime) -> None:
    for action in ("write", "tag"):
        line = f"p, dave, tag:team=green, {action}, allow"
        with (
            Memory(rt).transaction("default", write=True) as (conn, ctx),
            pytest.raises(InvalidInput) as caught,
        ):
            policy_service.add_policy(conn, ctx, line)
        assert f"a tag rule cannot allow {action!r}" in caught.value.detail
    # Denying by tag, and granting read or delete by tag, stay possible.
    add(
        rt,
        "p, dave, tag:team=green, write, deny",
        "p, dave, tag:team=green, tag, deny",
        "p, dave, tag:team=green, delete, allow",
    )


def test_a_tag_rule_in_the_table_grants_no_store_anywhere(rt: Runtime, actor: MakeActor) -> None:
    add(rt, "p, alice, path:/alice/*, write, allow", "p, alice, path:/alice/*, read, allow")
    store(actor, "alice", "/alice/private")
    insert_raw(rt, "p, dave, tag:team=green, write, allow")  # as an older memory held it
    before = count_facts(rt)
    with pytest.raises(Forbidden):
        store(actor, "dave", "/alice/private", team="green")
    with pytest.raises(Forbidden):
        store(actor, "dave", "/dave/own", team="green")
    assert count_facts(rt) == before


def test_a_tag_deny_on_write_holds_even_when_the_fact_overrides_the_tag(
    rt: Runtime, actor: MakeActor
) -> None:
    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/proj/secret", {"team": "red"})
    add(rt, "p, erin, path:/proj/*, write, allow", "p, erin, tag:team=red, write, deny")
    before = count_facts(rt)
    with pytest.raises(Forbidden):
        store(actor, "erin", "/proj/secret")  # inherits team=red
    with pytest.raises(Forbidden):
        store(actor, "erin", "/proj/secret", team="blue")  # own tag over the inherited one
    with pytest.raises(Forbidden):
        store(actor, "erin", "/proj/open", team="red")  # the tag the writer chose
    assert count_facts(rt) == before
    assert store(actor, "erin", "/proj/open", team="blue").path == "/proj/open"


def test_delete_may_be_granted_by_a_tag_rule_and_any_deny_wins(
    rt: Runtime, actor: MakeActor
) -> None:
    add(
        rt,
        "p, alice, path:/shared/*, write, allow",
        "p, alice, path:/shared/*, read, allow",
        "p, alice, tag:owner=alice, delete, allow",
    )
    mine = store(actor, "alice", "/shared/mine")
    kept = store(actor, "alice", "/shared/kept", keep="yes")
    theirs = store(actor, "default", "/shared/theirs")
    add(rt, "p, alice, tag:keep=yes, delete, deny")
    with actor("alice").tx() as (conn, ctx):
        fact_service.delete_fact(conn, ctx, mine.id)
    for fact in (kept, theirs):
        with actor("alice").tx() as (conn, ctx), pytest.raises(Forbidden):
            fact_service.delete_fact(conn, ctx, fact.id)


def test_a_writer_cannot_declassify_its_subtree_without_tag(rt: Runtime, actor: MakeActor) -> None:
    add(rt, "p, w, path:/x/*, write, allow", "p, w, path:/x/*, read, allow")
    store(actor, "default", "/x/other", visibility="private")
    with actor("w").tx() as (conn, ctx), pytest.raises(Forbidden, match="may not change tags"):
        path_service.set_path_tags(conn, ctx, "/x", {"visibility": "public"})
    with actor("default").tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/x", {"team": "blue"})
    with actor("w").tx() as (conn, ctx), pytest.raises(Forbidden):
        path_service.remove_path_tag(conn, ctx, "/x", "team")
    # A subject that cannot see the node is told it does not exist.
    with actor("stranger").tx() as (conn, ctx), pytest.raises(NotFound):
        path_service.set_path_tags(conn, ctx, "/x", {"visibility": "public"})
    insert_raw(rt, "p, w, tag:team=blue, tag, allow")  # a tag rule grants no tag either
    with actor("w").tx() as (conn, ctx), pytest.raises(Forbidden):
        path_service.set_path_tags(conn, ctx, "/x", {"visibility": "public"})
    with rt.engine.connect() as conn:
        tags = conn.execute(select(path_tags.c.key, path_tags.c.value)).all()
    assert [tuple(t) for t in tags] == [("team", "blue")]

    add(rt, "p, w, path:/x/*, tag, allow")
    with actor("w").tx() as (conn, ctx):
        node = path_service.set_path_tags(conn, ctx, "/x/sub", {"visibility": "public"})
        path_service.remove_path_tag(conn, ctx, "/x", "team")
    assert node.tags == {"visibility": "public"}


def test_a_tag_holder_cannot_declassify_a_deleted_fact_it_may_not_read(
    rt: Runtime, actor: MakeActor
) -> None:
    """A deleted fact stays readable by id (include_deleted) and in its history: a path
    tag above it decides who reads it as much as for a live one."""
    add(rt, "p, w, path:/x/*, tag, allow", "p, w, path:/x/pub/*, read, allow")
    gone = store(actor, "default", "/x/old/f")
    with actor("default").tx() as (conn, ctx):
        fact_service.delete_fact(conn, ctx, gone.id)
    # The refusal comes after the write, in its transaction: raised through it, it
    # rolls the write back.
    with pytest.raises(Forbidden, match="may not change tags"), actor("w").tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/x/old", {"team": "blue"})
    with rt.engine.connect() as conn:
        tags = conn.execute(select(path_tags.c.key, path_tags.c.value)).all()
    assert ("team", "blue") not in [tuple(t) for t in tags]
    with actor("w").tx() as (conn, ctx):  # where nothing hidden lies, it may
        path_service.set_path_tags(conn, ctx, "/x/pub", {"team": "blue"})


def test_a_tag_deny_covers_the_tag_being_set(rt: Runtime, actor: MakeActor) -> None:
    store(actor, "default", "/x/note")
    add(
        rt,
        "p, w, path:/x/*, tag, allow",
        "p, w, path:/x/*, read, allow",
        "p, w, tag:visibility=public, tag, deny",
    )
    with actor("w").tx() as (conn, ctx), pytest.raises(Forbidden):
        path_service.set_path_tags(conn, ctx, "/x", {"visibility": "public"})
    with actor("w").tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/x", {"visibility": "team"})


def test_a_node_a_subject_may_tag_is_visible_to_it(rt: Runtime, actor: MakeActor) -> None:
    store(actor, "default", "/t/inner")
    add(rt, "p, tagger, path:/t/*, tag, allow")
    with Memory(rt).transaction("tagger") as (conn, ctx):
        node = path_service.describe_path(conn, ctx, "/t")
    assert node.children == [Child("/t/inner", 0)]
    with Memory(rt).transaction("stranger") as (conn, ctx), pytest.raises(NotFound):
        path_service.describe_path(conn, ctx, "/t")


def test_rules_are_read_on_the_callers_connection(rt: Runtime) -> None:
    """Reloading the rules draws no second connection from the pool: a cold server's
    first requests, each holding one, waited for the pool's timeout (503s with
    database.pool_size 1), and the lines now come from the snapshot their version did."""
    from sqlalchemy import event

    drawn: list[object] = []

    def count(*_args: object) -> None:
        drawn.append(object())

    add(rt, "p, alice, path:/a/*, read, allow")
    with rt.engine.connect() as conn:
        event.listen(rt.engine, "checkout", count)
        try:
            rt.access._version = -1  # as after another process changed the rules
            enforcer = rt.access.current(conn)
        finally:
            event.remove(rt.engine, "checkout", count)
    assert drawn == []
    assert ["alice", "path:/a/*", "read", "allow"] in enforcer.get_policy()
