"""Scope tokens: a search walks the reader's part of the memory, and finds the same.

A reader's allow rules become tokens of which every fact it may read holds one
(app.acl.scope); the keyword index and the vector walk start from the facts holding
them. These tests hold the two promises that makes: no fact the reader may read is
left out (whatever the rules, path tags set after the facts included), and no page
changes (ids, order, every score), in every mode, on both backends.
"""

from __future__ import annotations

from sqlalchemy import select

from app.acl import scope
from app.acl.model import parse_object
from app.db.dialects import backend
from app.db.tables import facts
from app.services import paths as path_service
from app.services import search as search_service
from app.services import vector_index as vector_service
from app.services.facts import NewFact
from app.services.visibility import readable, readable_scope
from tests.services.test_search import MODES, find, grant, model, store  # noqa: F401 (fixture)

READERS = {
    # subject: its read rules (its write rules: the whole tree, to store the facts)
    "sub": ["path:/teams/red/*"],
    "node": ["path:/teams/blue"],
    "owner": ["tag:owner=writer"],
    "tagged": ["tag:team=x"],
    "mixed": ["path:/teams/red/a/*", "tag:team=y", "path:/misc"],
}


def _layout(actor, rt, model):  # noqa: F811 (the fixture, passed on)
    """Facts by two writers across a small tree, own tags on some; a path tag set after
    the facts are stored (what a fact inherits changes; its tokens do not)."""
    grant(rt, "p, writer, path:/*, write, allow", "p, other, path:/*, write, allow")
    for subject, objects in READERS.items():
        grant(rt, *[f"p, {subject}, {obj}, read, allow" for obj in objects])
    grant(rt, "p, mixed, path:/teams/red/a/secret/*, read, deny")
    places = ["/teams/red/a", "/teams/red/a/secret", "/teams/red/b", "/teams/blue"]
    places += ["/teams/blue/deep", "/misc", "/misc/x", "/"]
    for writer in ("writer", "other"):
        items = [
            NewFact(p, f"kelp harbor note {i} at {p}", tags={"team": "x"} if i % 3 == 0 else None)
            for p in places
            for i in range(4)
        ]
        store(actor(writer), items, model)
    with actor().tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/teams/blue", {"team": "y"})
        path_service.set_path_tags(conn, ctx, "/misc/x", {"team": "x"})


def test_every_fact_a_reader_may_read_holds_one_of_its_tokens(actor, rt, model) -> None:  # noqa: F811
    _layout(actor, rt, model)
    for subject in READERS:
        with actor(subject).tx() as (conn, ctx):
            tokens = readable_scope(conn, ctx)
            assert tokens, subject  # each of these rule sets narrows the memory
            rows = conn.execute(select(facts.c.id, facts.c.scope).where(readable(ctx))).all()
            may_read = {fact_id: held for fact_id, held in rows}
            assert may_read, subject
            for fact_id, held in may_read.items():
                assert set(held.split()) & set(tokens), (subject, fact_id)
            # ... and the index holds them: the facts it names hold every readable one.
            members = backend(conn).keywords.scope_members(conn, tokens, 10_000)
            assert set(may_read) <= set(members), subject
            assert len(members) < len(conn.execute(select(facts.c.id)).all())


def test_a_rule_on_the_whole_tree_or_too_many_rules_narrow_nothing() -> None:
    root = [(parse_object("path:/*"), "allow"), (parse_object("tag:team=x"), "allow")]
    assert scope.reader_tokens(root, []) is None and not scope.narrows(root)
    many = [(parse_object(f"path:/p{i}/*"), "allow") for i in range(scope.MAX_READER_TOKENS + 1)]
    assert scope.reader_tokens(many, []) is None
    tag = [(parse_object("tag:team=x"), "allow")]
    assert scope.reader_tokens(tag, ["/"]) is None  # the root carries the tag: every fact
    assert scope.reader_tokens([(parse_object("path:/a"), "deny")], []) is None
    # A fact's tokens: each node above it and its own, each own tag.
    held = scope.fact_scope("/a/b", {"owner": "w", "team": "x"}).split()
    assert held == [
        scope.node_token("/a"),
        scope.node_token("/a/b"),
        scope.tag_token("owner", "w"),
        scope.tag_token("team", "x"),
    ]


def test_the_walks_over_the_readers_part_change_no_page(
    actor,
    rt,
    model,  # noqa: F811 (the fixture)
    monkeypatch,
) -> None:
    """A reader who sees a small part of a memory: every mode's page the same as with
    no scope tokens (the whole index walked), and a fact it stores after a search is
    found by the next (the kept members catch up)."""
    grant(rt, "p, reader, path:/mine/*, read, allow", "p, reader, path:/mine/*, write, allow")
    reader = actor("reader")
    topics = ("harbor lantern", "quay kelp", "tide pier", "lantern tide", "kelp harbor")
    store(reader, [NewFact("/mine", f"{t} {i}") for i, t in enumerate(topics * 4)], model)
    others = [NewFact(f"/o/{i % 7}", f"{topics[i % 5]} other {i}") for i in range(400)]
    store(actor(), others, model)
    with reader.tx() as (conn, _ctx):
        vector_service.repartition_if_stale(conn)
    questions = ("harbor lantern", "what of the quay and kelp", "pier")
    walked = []
    within = vector_service.Probe.within
    monkeypatch.setattr(
        vector_service.Probe,
        "within",
        lambda self, ids, whole=False: walked.append(len(ids)) or within(self, ids, whole),
    )

    def all_pages() -> dict[tuple[str, str], list]:
        return {
            (q, m): [
                (r.fact.id, r.score, r.scores) for r in find(reader, q, mode=m, peek=True).results
            ]
            for q in questions
            for m in MODES
        }

    small = search_service._small_part
    parts = []
    monkeypatch.setattr(
        search_service,
        "_small_part",
        lambda conn, ctx, want: parts.append(small(conn, ctx, want)) or parts[-1],
    )
    scoped = all_pages()
    if backend_in_database(rt):
        assert parts and all(parts), parts  # PostgreSQL scored the reader's part whole
    else:
        assert walked and max(walked) < 40, walked  # its part, not the whole index
    monkeypatch.setattr(search_service, "readable_scope", lambda conn, ctx: None)
    assert all_pages() == scoped
    monkeypatch.undo()
    late = store(reader, [NewFact("/mine", "harbor lantern kelp quay, stored late")], model)
    again = all_pages()
    assert any(late[0].id in [r[0] for r in again[q, "semantic"]] for q in questions)
    monkeypatch.setattr(search_service, "readable_scope", lambda conn, ctx: None)
    assert all_pages() == again


def backend_in_database(rt) -> bool:
    with rt.engine.connect() as conn:
        return backend(conn).vectors.in_database
