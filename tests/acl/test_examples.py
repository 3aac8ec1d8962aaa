"""The seed's access rules, one example at a time, through the real services.

Every visibility check asks both sides: the compiled read fragment (what every
listing uses) and Casbin's enforce() on the fact's path and effective tags. They
must agree, and agree with what the test expects.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
from functools import lru_cache
from types import SimpleNamespace

import pytest
from casbin.util import expression as casbin_expression
from sqlalchemy import Connection, insert, select

from app.acl import enforcer as enforcer_module
from app.acl.compile import read_predicate
from app.acl.enforcer import admins
from app.acl.model import (
    ObjectPattern,
    Resource,
    object_match,
    parse_object,
    parse_policy_line,
)
from app.db.tables import effective_fact_tags, facts, path_tags, paths
from app.errors import Forbidden, InvalidInput
from app.runtime import Runtime
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services import policies as policy_service
from app.services.facts import NewFact
from app.usecases.memory import Memory as UseCases
from tests.conftest import Actor

MakeActor = Callable[..., Actor]
EVERYONE_PUBLIC = "p, everyone, tag:visibility=public, read, allow"


# --- helpers -----------------------------------------------------------------


def add(rt: Runtime, *lines: str) -> None:
    with UseCases(rt).transaction("default", write=True) as (conn, ctx):
        for line in lines:
            policy_service.add_policy(conn, ctx, line)


def remove(rt: Runtime, *lines: str) -> None:
    with UseCases(rt).transaction("default", write=True) as (conn, ctx):
        for line in lines:
            policy_service.remove_policy(conn, ctx, line)


class Memory:
    """Facts stored through the service, known by a label (their content)."""

    def __init__(self, rt: Runtime, actor: MakeActor) -> None:
        self.rt, self.actor = rt, actor
        self.ids: dict[str, int] = {}

    def store(self, label: str, path: str, owner: str = "default", **tags: str) -> None:
        with self.actor(owner).tx() as (conn, ctx):
            fact = fact_service.store_fact(conn, ctx, NewFact(path, label, tags))
        self.ids[label] = fact.id

    def seen(self, subject: str) -> set[str]:
        """The labels `subject` may read; the SQL fragment and Casbin must agree."""
        with UseCases(self.rt).transaction(subject) as (conn, ctx):
            clause = ctx.access.read_clause(facts.c.id, facts.c.path_id)
            by_sql = set(conn.execute(select(facts.c.id).where(clause)).scalars())
            by_casbin = {i for i in self.ids.values() if ctx.access.can("read", resource(conn, i))}
        mine = set(self.ids.values())
        assert by_sql & mine == by_casbin, f"{subject}: SQL and Casbin disagree"
        return {label for label, i in self.ids.items() if i in by_sql}

    def listed(self, subject: str) -> set[str]:
        """The labels list_facts hands to `subject` (its own facts only)."""
        with UseCases(self.rt).transaction(subject) as (conn, ctx):
            page = fact_service.list_facts(conn, ctx, limit=100)
        return {f.content for f in page.facts if f.id in self.ids.values()}


def resource(conn: Connection, fact_id: int) -> Resource:
    path = conn.execute(
        select(paths.c.path).join(facts, facts.c.path_id == paths.c.id).where(facts.c.id == fact_id)
    ).scalar_one()
    return Resource(path, effective_tags(conn, fact_id))


def effective_tags(conn: Connection, fact_id: int) -> dict[str, str]:
    rows = conn.execute(
        select(effective_fact_tags.c.key, effective_fact_tags.c.value).where(
            effective_fact_tags.c.fact_id == fact_id
        )
    )
    return dict(rows.tuples().all())


@pytest.fixture
def memory(rt: Runtime, actor: MakeActor) -> Memory:
    return Memory(rt, actor)


# --- the seed's examples -----------------------------------------------------


def test_the_seed_example_lines(rt: Runtime, memory: Memory) -> None:
    memory.store("acme plan", "/work/acme/plan")
    memory.store("acme root", "/work/acme")
    memory.store("other work", "/work/other")
    memory.store("public note", "/notes/pub", visibility="public")
    memory.store("private note", "/notes/priv")
    memory.store("public secret", "/secrets/key", visibility="public")
    memory.store("secrets root", "/secrets")
    memory.store("guide", "/docs/guide")
    add(
        rt,
        "p, cli, path:/work/acme/*, read, allow",
        "p, cli, tag:visibility=public, read, allow",
        "p, cli, path:/secrets/*, read, deny",
        "g, cli, reader",
        "p, reader, path:/docs/*, read, allow",
    )
    expected = {"acme plan", "acme root", "public note", "guide"}
    assert memory.seen("cli") == expected
    assert memory.listed("cli") == expected
    # The role's line reaches cli only through g: another subject sees public facts only.
    assert memory.seen("someone") == {"public note", "public secret"}


def test_a_subtree_holds_its_root_and_a_node_only_itself(rt: Runtime, memory: Memory) -> None:
    for label, path in [
        ("root", "/"),
        ("work", "/work"),
        ("work/a", "/work/a"),
        ("work/a/b", "/work/a/b"),
        ("workshop", "/workshop"),
    ]:
        memory.store(label, path)
    add(
        rt,
        "p, subtree, path:/work/*, read, allow",
        "p, node, path:/work, read, allow",
        "p, all, path:/*, read, allow",
        "p, rootnode, path:/, read, allow",
    )
    assert memory.seen("subtree") == {"work", "work/a", "work/a/b"}
    assert memory.seen("node") == {"work"}
    assert memory.seen("all") == {"root", "work", "work/a", "work/a/b", "workshop"}
    assert memory.seen("rootnode") == {"root"}


@pytest.mark.parametrize("path", ["/ab", "/a-b", "/a.b", "/a_b", "/a0", "/b/a", "/abc/a"])
def test_a_subtree_is_not_a_prefix_match(rt: Runtime, memory: Memory, path: str) -> None:
    # keyMatch lets '*' cross '/', a plain prefix lets /a/* cover /ab: neither applies.
    memory.store("inside", "/a/b/c")
    memory.store("root", "/a")
    memory.store("outside", path)
    add(rt, "p, s, path:/a/*, read, allow")
    assert memory.seen("s") == {"inside", "root"}
    pattern = parse_object("path:/a/*")
    assert not pattern.matches(path, {})
    assert not object_match(Resource(path, {}).encode(), "path:/a/*")
    assert object_match(Resource("/a", {}).encode(), "path:/a/*")


def test_deny_beats_every_allow(rt: Runtime, memory: Memory) -> None:
    memory.store("plan", "/work/plan", team="x")
    memory.store("keep", "/work/keep")
    memory.store("log", "/work/log/today")
    add(
        rt,
        # The same object allowed and denied.
        "p, a, path:/work/*, read, allow",
        "p, a, path:/work/*, read, deny",
        # An allowed subtree with a denied node and a denied tag.
        "p, b, path:/work/*, read, allow",
        "p, b, path:/work/keep, read, deny",
        "p, b, tag:team=x, read, deny",
        # An allow of the subject's own beaten by a deny through a role.
        "p, c, path:/work/*, read, allow",
        "g, c, auditors",
        "p, auditors, path:/work/log/*, read, deny",
        # A deny on write or delete says nothing about read.
        "p, d, path:/work/*, read, allow",
        "p, d, path:/work/*, write, deny",
        "p, d, path:/work/*, delete, deny",
    )
    assert memory.seen("a") == set()
    assert memory.seen("b") == {"log"}
    assert memory.seen("c") == {"plan", "keep"}
    assert memory.seen("d") == {"plan", "keep", "log"}


def test_no_policy_means_no_access(rt: Runtime, memory: Memory) -> None:
    memory.store("plain", "/work/plain")
    memory.store("public", "/work/public", visibility="public")
    assert memory.seen("nobody") == {"public"}  # through everyone, nothing else
    remove(rt, EVERYONE_PUBLIC)
    assert memory.seen("nobody") == set()
    with UseCases(rt).transaction("nobody") as (conn, ctx):
        assert ctx.access.rules("read") == []
        # Not even the /memory facts: no fact at all.
        clause = ctx.access.read_clause(facts.c.id, facts.c.path_id)
        assert conn.execute(select(facts.c.id).where(clause)).first() is None


def test_write_and_delete_lines_grant_no_read(rt: Runtime, memory: Memory) -> None:
    memory.store("plan", "/work/plan")
    add(rt, "p, w, path:/work/*, write, allow", "p, w, path:/work/*, delete, allow")
    assert memory.seen("w") == set()


# --- owners and tags ---------------------------------------------------------


def test_an_owner_tag_on_a_path_never_reaches_a_fact(
    rt: Runtime, memory: Memory, actor: MakeActor
) -> None:
    with actor("default").tx() as (conn, ctx), pytest.raises(InvalidInput) as caught:
        path_service.set_path_tags(conn, ctx, "/shared", {"owner": "alice"})
    assert "owner" in caught.value.detail
    # An older memory (or a hand edit) may hold one all the same: it never reaches a fact.
    with actor("default").tx() as (conn, ctx):
        node = path_service.ensure_path(conn, "/shared", 0.0)
        conn.execute(insert(path_tags).values(path_id=node, key="owner", value="alice"))
    add(
        rt,
        "p, bob, path:/shared/*, write, allow",
        "p, alice, tag:owner=alice, read, allow",
        "p, bob, tag:owner=bob, read, allow",
    )
    memory.store("bob's", "/shared/x", owner="bob")
    memory.store("default's", "/shared", owner="default")
    assert memory.seen("alice") == set()
    assert memory.seen("bob") == {"bob's"}
    with UseCases(rt).transaction() as (conn, _ctx):
        assert effective_tags(conn, memory.ids["bob's"])["owner"] == "bob"
        assert effective_tags(conn, memory.ids["default's"])["owner"] == "default"


def test_a_store_that_carries_an_owner_tag_stops(actor: MakeActor) -> None:
    with actor("default").tx() as (conn, ctx), pytest.raises(InvalidInput) as caught:
        fact_service.store_fact(conn, ctx, NewFact("/x", "mine", {"owner": "alice"}))
    assert "owner" in caught.value.detail


def test_inherited_tags_the_nearest_wins_and_own_tags_win(
    rt: Runtime, memory: Memory, actor: MakeActor
) -> None:
    with actor("default").tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/pub", {"visibility": "public"})
        path_service.set_path_tags(conn, ctx, "/pub/closed", {"visibility": "private"})
    memory.store("inherits public", "/pub/a/b")
    memory.store("own private", "/pub/a", visibility="private")
    memory.store("nearest private", "/pub/closed/x")
    memory.store("own public", "/pub/closed/y", visibility="public")
    assert memory.seen("anyone") == {"inherits public", "own public"}


def test_a_subject_reads_its_own_facts(rt: Runtime, memory: Memory) -> None:
    add(rt, "p, alice, path:/*, write, allow", "p, alice, tag:owner=alice, read, allow")
    memory.store("alice's", "/notes/a", owner="alice")
    memory.store("default's", "/notes/d")
    assert memory.seen("alice") == {"alice's"}


# --- roles -------------------------------------------------------------------


def test_everyone_is_every_subject_s_role_without_a_g_line(
    rt: Runtime, memory: Memory, actor: MakeActor
) -> None:
    memory.store("public", "/misc/pub", visibility="public")
    memory.store("open", "/open/a")
    memory.store("library", "/lib/book")
    memory.store("secret", "/secrets/s", visibility="public")
    add(
        rt,
        "p, everyone, path:/open/*, read, allow",
        "g, everyone, readers",
        "p, readers, path:/lib/*, read, allow",
        "p, everyone, path:/secrets/*, read, deny",
    )
    assert memory.seen("zed") == {"public", "open", "library"}
    # A deny for everyone holds for default too, its path:/* allow notwithstanding.
    assert "secret" not in memory.seen("default")
    with UseCases(rt).transaction("zed") as (_conn, ctx):
        assert ctx.access.principals == {"zed", "everyone", "readers"}


def test_roles_chain_and_a_change_takes_effect_on_the_next_request(
    rt: Runtime, memory: Memory
) -> None:
    memory.store("x", "/x/1")
    add(rt, "g, alice, team", "g, team, staff", "p, staff, path:/x/*, read, allow")
    assert memory.seen("alice") == {"x"}
    remove(rt, "g, team, staff")
    assert memory.seen("alice") == set()


def test_a_role_chain_deeper_than_casbin_follows_grants_nothing(
    rt: Runtime, memory: Memory
) -> None:
    # Casbin's role manager follows at most 10 links; the fragment must stop there too.
    memory.store("near", "/near/1")
    memory.store("far", "/far/1")
    chain = ["zed", *(f"r{i}" for i in range(1, 13))]
    add(rt, *(f"g, {a}, {b}" for a, b in itertools.pairwise(chain)))
    add(rt, "p, r3, path:/near/*, read, allow", "p, r12, path:/far/*, read, allow")
    assert memory.seen("zed") == {"near"}


def test_policies_need_the_admin_role(rt: Runtime) -> None:
    with UseCases(rt).transaction("alice", write=True) as (conn, ctx), pytest.raises(Forbidden):
        policy_service.add_policy(conn, ctx, "p, alice, path:/*, read, allow")


# --- policy lines ------------------------------------------------------------


# The message names as many fields as it shows, and how many the line had (issue 31).
P_FIELDS = "a p line has five fields, p, SUBJECT, OBJECT, ACTION, EFFECT; this one has"
G_FIELDS = "a g line has three fields, g, MEMBER, ROLE; this one has"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("p, alice, /work/*, read, allow", "is not one of path:/a/b"),
        ("p, alice, work, read, allow", "is not one of path:/a/b"),
        ("p, alice, path:work, read, allow", "is not one of path:/a/b"),
        ("p, alice, path:/Work/*, read, allow", "paths in lowercase"),
        ("p, alice, path:/a/, read, allow", "'path:/a/'"),
        ("p, alice, path://*, read, allow", "'path://*'"),
        ("p, alice, path:/a//b, read, allow", "'path:/a//b'"),
        ("p, alice, path:/a*, read, allow", "'path:/a*'"),
        ("p, alice, path:/a/**, read, allow", "'path:/a/**'"),
        ("p, alice, path:/a/*/b, read, allow", "'path:/a/*/b'"),
        ("p, alice, path:/_a, read, allow", "'path:/_a'"),
        ("p, alice, tag:visibility, read, allow", "tag:key=value"),
        ("p, alice, tag:=public, read, allow", "'tag:=public'"),
        ("p, alice, tag:visibility=, read, allow", "'tag:visibility='"),
        ("p, alice, tag:k=v=w, read, allow", "'tag:k=v=w'"),
        ("p, alice, tag:Key=v, read, allow", "'tag:Key=v'"),
        ("p, alice, owner=alice, read, allow", "is not one of path:/a/b"),
        ("p, alice, path:/a, admin, allow", "action 'admin' is not one of read, write, delete"),
        ("p, alice, path:/a, READ, allow", "action 'READ'"),
        ("p, alice, path:/a, read, permit", "effect 'permit' is not allow or deny"),
        ("p, alice, path:/a, read", f"{P_FIELDS} 4"),
        ("p, alice, path:/a, read, allow, extra", f"{P_FIELDS} 6"),
        ("p, alice, path:/a, read, allow,", f"{P_FIELDS} 6"),
        ("g, alice", f"{G_FIELDS} 2"),
        ("g, alice, reader, extra", f"{G_FIELDS} 4"),
        ("x, alice, reader", "starts with p or g, not 'x'"),
        ("P, alice, path:/a, read, allow", "starts with p or g, not 'P'"),
        ("", "starts with p or g"),
        ("p, al ice, path:/a, read, allow", "subject 'al ice'"),
        ("p, alice=x, path:/a, read, allow", "subject 'alice=x'"),
        ("p, , path:/a, read, allow", "subject ''"),
        ("g, alice, re ader", "subject 're ader'"),
    ],
)
def test_a_bad_policy_line_is_refused_clearly(line: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_policy_line(line)
    assert message in caught.value.detail


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        ("p, cli, path:/work/acme/*, read, allow", ObjectPattern("subtree", "/work/acme")),
        (
            "p, cli, tag:visibility=public, read, allow",
            ObjectPattern("tag", key="visibility", value="public"),
        ),
        ("p, cli, path:/secrets/*, read, deny", ObjectPattern("subtree", "/secrets")),
        ("p, cli, path:/*, write, allow", ObjectPattern("subtree", "/")),
        ("p, cli, path:/, delete, allow", ObjectPattern("node", "/")),
        ("p, cli, path:/a.b/c-d/e_f, read, allow", ObjectPattern("node", "/a.b/c-d/e_f")),
        (
            "p, alice, tag:owner=alice, read, allow",
            ObjectPattern("tag", key="owner", value="alice"),
        ),
    ],
)
def test_the_seed_s_policy_lines_parse(line: str, pattern: ObjectPattern) -> None:
    parsed = parse_policy_line(line)
    assert str(parsed) == line
    assert parse_object(parsed.values[1]) == pattern


def test_g_lines_parse() -> None:
    assert parse_policy_line("g,cli,reader").values == ("cli", "reader")
    assert str(parse_policy_line("g, alice,    everyone")) == "g, alice, everyone"


def test_the_service_refuses_a_bad_line_and_stores_nothing(rt: Runtime) -> None:
    with UseCases(rt).transaction("default", write=True) as (conn, ctx):
        before = policy_service.list_policies(conn, ctx)
        with pytest.raises(InvalidInput):
            policy_service.add_policy(conn, ctx, "p, alice, /work/*, read, allow")
        assert policy_service.list_policies(conn, ctx) == before


def test_a_malformed_stored_rule_grants_nothing(rt: Runtime, memory: Memory) -> None:
    # A row written around the service (an import, a hand edit) must not open anything.
    memory.store("plan", "/work/plan")
    with UseCases(rt).transaction("default", write=True) as (conn, _ctx):
        conn.exec_driver_sql(
            "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3) "
            "VALUES ('p', 'mallory', '/work/*', 'read', 'allow')"
        )
    assert memory.seen("mallory") == set()


def test_the_fragment_of_no_allow_is_false_and_root_deny_is_false() -> None:
    everything = ObjectPattern("subtree", "/")
    assert str(read_predicate([], facts.c.id, facts.c.path_id)) == "false"
    denied = read_predicate(
        [(everything, "allow"), (everything, "deny")], facts.c.id, facts.c.path_id
    )
    assert str(denied) == "false"


def test_a_tag_value_with_a_colon_is_a_value_not_a_parameter(rt: Runtime, memory: Memory) -> None:
    """The fragment is SQL text: ':x' in a quoted value must not read as a bind name."""
    memory.store("colon", "/c/a", team=":x")
    memory.store("plain", "/c/b", team="x")
    add(rt, "p, carol, tag:team=:x, read, allow", "p, carol, tag:team=a:b, read, allow")
    assert memory.seen("carol") == {"colon"}


def test_who_holds_admin_is_what_the_enforcer_decides(rt: Runtime) -> None:
    """admins() (the guard on removing the last admin line) agrees with is_admin."""
    chain = [("dana", "r0"), *((f"r{i}", f"r{i + 1}") for i in range(11)), ("r11", "admin")]
    links = [("default", "admin"), ("carol", "ops"), ("ops", "admin"), *chain]
    assert admins(links) == {"default", "carol"}  # dana is 12 links away: past Casbin's depth
    memory = UseCases(rt)
    for member, role in [("carol", "ops"), ("ops", "admin"), *chain]:
        memory.add_policy("default", f"g, {member}, {role}")
    with memory.transaction("dana") as (_conn, ctx):
        assert not ctx.access.is_admin
    with memory.transaction("carol") as (_conn, ctx):
        assert ctx.access.is_admin
    # A role whose last member went is nobody's, though Casbin would now read it as a name.
    assert admins([("ops", "admin")], roles=["ops"]) == set()
    assert admins([("everyone", "admin")]) == {"everyone"}


def test_the_enforcer_parses_its_matcher_once(rt: Runtime, monkeypatch) -> None:
    """Casbin parses the matcher's text again for every decision unless told not to: a
    quarter of a decision's time. Parsed once, it decides as before."""
    real_parse = ast.parse
    parsed: list[str] = []

    def parse(source: str, *args, **kwargs) -> ast.AST:
        parsed.append(source)
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(casbin_expression, "ast", SimpleNamespace(parse=parse))
    monkeypatch.setattr(
        enforcer_module, "_parsed_matcher", lru_cache(enforcer_module._parsed_matcher.__wrapped__)
    )
    add(rt, "p, cli, path:/work/*, read, allow", "p, cli, path:/work/x/*, read, deny")
    with rt.engine.connect() as conn:
        enforcer = rt.access.current(conn)
    asked = [
        enforcer.enforce(subject, Resource(path, {}).encode(), "read")
        for subject in ("cli", "someone")
        for path in ("/work/a", "/work/x/b", "/home")
    ]
    assert asked == [True, False, False, False, False, False]
    assert len(parsed) == 1


def test_a_decision_is_asked_of_casbin_once_per_loaded_policy(rt: Runtime) -> None:
    """Access.can keeps enforce()'s answers (a batch stores many facts at one node); a
    policy change loads a new enforcer, whose Access asks again."""
    add(rt, "p, memo, path:/memo/*, write, allow")
    node = Resource("/memo/a", {})

    def asked_twice() -> tuple[list[bool], int]:
        with UseCases(rt).transaction("memo") as (_conn, ctx):
            calls = []
            enforce = ctx.access.enforcer.enforce
            ctx.access.enforcer.enforce = lambda *a: calls.append(a) or enforce(*a)
            try:
                return [ctx.access.can("write", node) for _ in range(2)], len(calls)
            finally:
                del ctx.access.enforcer.enforce

    assert asked_twice() == ([True, True], 1)
    assert asked_twice() == ([True, True], 0)  # the same Access, the same answers
    add(rt, "p, memo, path:/memo/a, write, deny")
    assert asked_twice() == ([False, False], 1)
