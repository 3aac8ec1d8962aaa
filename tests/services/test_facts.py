"""The memory store through its services: paths, facts, tags, supersede, delete, history."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import pytest
from sqlalchemy import func, insert, select, text

from app.db.dialects import backend
from app.db.engine import write_transaction
from app.db.tables import fact_tags, facts, facts_vec, path_tags, paths
from app.errors import Conflict, InvalidInput, NotFound
from app.services import facts as fact_service
from app.services import paths as path_service
from app.services.context import Context
from app.services.facts import Link, NewFact
from app.usecases.memory import Memory


def at_once(targets: list[Callable[[], None]]) -> list[BaseException]:
    """Run each target on a thread of its own, all at once; what any of them raised."""
    errors: list[BaseException] = []

    def run(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # surfaced to the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def count(conn, table) -> int:
    return conn.execute(select(func.count()).select_from(table)).scalar_one()


def test_case_and_trailing_slash_fold_to_one_node(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        a = fact_service.store_fact(conn, ctx, NewFact("/Projects/Embornal", "one"))
        b = fact_service.store_fact(conn, ctx, NewFact("/projects/embornal/", "two"))
        assert a.path == b.path == "/projects/embornal"
        node_count = conn.execute(
            select(func.count()).select_from(paths).where(paths.c.path == "/projects/embornal")
        ).scalar_one()
        assert node_count == 1
        # Ancestors were created, each pointing at its parent.
        parent = conn.execute(
            select(paths.c.parent_id).where(paths.c.path == "/projects/embornal")
        ).scalar_one()
        assert conn.execute(select(paths.c.path).where(paths.c.id == parent)).scalar() == (
            "/projects"
        )


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("/projects/bad seg", "'bad seg'"),
        ("/projects/_hidden", "'_hidden'"),
        ("/a//b", "empty segment"),
        ("no-slash", "must start with '/'"),
        ("/" + "x" * 65, "longer than 64"),
        ("/" + "/".join(["a"] * 33), "at most 32"),
        ("/caf\u00e9", "'caf\u00e9'"),
    ],
)
def test_a_bad_segment_is_refused_and_named(actor, raw: str, named: str) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        before = count(conn, facts)
        with pytest.raises(InvalidInput) as caught:
            fact_service.store_fact(conn, ctx, NewFact(raw, "x"))
        assert named in caught.value.detail
        assert count(conn, facts) == before


def test_a_store_with_an_owner_tag_leaves_no_trace(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        before = (count(conn, facts), count(conn, paths), count(conn, fact_tags))
    with pytest.raises(InvalidInput, match="owner"), me.tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/new/place", "x", {"owner": "mallory"}))
    with me.tx() as (conn, ctx):
        assert (count(conn, facts), count(conn, paths), count(conn, fact_tags)) == before


def test_the_memory_writes_owner_column_and_tag(actor) -> None:
    alice = actor("alice")
    with write_transaction(alice.runtime.engine) as conn:
        conn.execute(
            text(
                "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3) "
                "VALUES ('p', 'alice', 'path:/alice/*', 'write', 'allow'),"
                "('p', 'alice', 'path:/alice/*', 'read', 'allow')"
            )
        )
    with alice.tx() as (conn, ctx):
        fact = fact_service.store_fact(conn, ctx, NewFact("/alice", "mine"))
    assert fact.owner == "alice"
    assert fact.tags["owner"] == "alice"


def test_tags_inherit_nearest_wins_and_the_fact_beats_them(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        path_service.set_path_tags(conn, ctx, "/a", {"team": "outer", "env": "prod"})
        path_service.set_path_tags(conn, ctx, "/a/b", {"team": "inner"})
        plain = fact_service.store_fact(conn, ctx, NewFact("/a/b/c", "x"))
        own = fact_service.store_fact(conn, ctx, NewFact("/a/b/c", "y", {"team": "mine"}))
    assert plain.effective_tags == {"team": "inner", "env": "prod", "owner": "default"}
    assert own.effective_tags["team"] == "mine"
    assert plain.tags == {"owner": "default"}


def test_a_path_tag_owner_never_reaches_a_fact(actor) -> None:
    me = actor()
    # Refused where it would be set (issue 18) ...
    with me.tx() as (conn, ctx), pytest.raises(InvalidInput):
        path_service.set_path_tags(conn, ctx, "/shared", {"owner": "mallory"})
    # ... and one an older memory holds never reaches a fact.
    with me.tx() as (conn, ctx):
        node = path_service.ensure_path(conn, "/shared", 0.0)
        conn.execute(insert(path_tags).values(path_id=node, key="owner", value="mallory"))
        fact = fact_service.store_fact(conn, ctx, NewFact("/shared/x", "x"))
        view = conn.execute(
            text("SELECT value FROM effective_fact_tags WHERE fact_id = :id AND key = 'owner'"),
            {"id": fact.id},
        ).all()
    assert fact.effective_tags["owner"] == "default"
    assert view == [("default",)]


def test_supersede_once_history_oldest_first(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        first = fact_service.store_fact(conn, ctx, NewFact("/h", "v1"))
        second = fact_service.store_fact(conn, ctx, NewFact("/h", "v2", supersedes_id=first.id))
        third = fact_service.store_fact(conn, ctx, NewFact("/h", "v3", supersedes_id=second.id))
    with pytest.raises(Conflict), me.tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/h", "again", supersedes_id=first.id))
    with me.tx() as (conn, ctx):
        chain = fact_service.history(conn, ctx, second.id)
        listing = fact_service.list_facts(conn, ctx, under="/h")
        old = fact_service.get_fact(conn, ctx, first.id, peek=True)
    assert [f.content for f in chain] == ["v1", "v2", "v3"]
    assert [f.id for f in listing.facts] == [third.id]
    assert old.superseded_by_id == second.id


def test_delete_sets_deleted_at_and_hides_the_fact(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        fact = fact_service.store_fact(conn, ctx, NewFact("/d", "gone soon"))
        fact_service.delete_fact(conn, ctx, fact.id)
    with me.tx() as (conn, ctx):
        with pytest.raises(NotFound):
            fact_service.get_fact(conn, ctx, fact.id)
        with pytest.raises(NotFound):
            fact_service.delete_fact(conn, ctx, fact.id)
        kept = fact_service.get_fact(conn, ctx, fact.id, include_deleted=True)
        assert kept.deleted_at is not None
        assert fact_service.history(conn, ctx, fact.id)[0].id == fact.id
        assert fact_service.list_facts(conn, ctx, under="/d").facts == []


def test_a_fact_does_not_change(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        fact = fact_service.store_fact(conn, ctx, NewFact("/immutable", "as written"))
    with pytest.raises(Exception, match="does not change"), me.tx() as (conn, _):
        conn.execute(text("UPDATE facts SET content = 'rewritten' WHERE id = :id"), {"id": fact.id})


def test_links_are_parsed_on_read(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        fact = fact_service.store_fact(
            conn, ctx, NewFact("/l", "see [[/Memory]] and [[/nowhere/yet]] and [[not a path]]")
        )
    assert fact.content.startswith("see [[/Memory]]")  # stored as written
    assert fact.links == [Link("/memory", True), Link("/nowhere/yet", False)]


def test_hydrating_a_page_costs_the_same_queries_for_2_facts_or_20(actor) -> None:
    from sqlalchemy import event

    me = actor()
    with me.tx() as (conn, ctx):
        stored = fact_service.store_facts(
            conn,
            ctx,
            [
                NewFact(f"/h/{i}", f"fact {i} links [[/h/{i + 1}]] and [[/memory]]")
                for i in range(20)
            ],
        )
    ids = [fact.id for fact in stored]

    def statements(page: list[int]) -> int:
        seen: list[str] = []
        with me.tx() as (conn, ctx):
            event.listen(conn, "before_cursor_execute", lambda *args: seen.append(args[2]))
            hydrated = fact_service.hydrate(conn, ctx, page)
        assert [fact.id for fact in hydrated] == page
        return len(seen)

    assert statements(ids) == statements(ids[:2])


def test_one_level_listing_of_a_path(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        for place in ("/p/a", "/p/a/deep", "/p/b"):
            fact_service.store_fact(conn, ctx, NewFact(place, f"fact at {place}"))
        node = path_service.describe_path(conn, ctx, "/P")
    assert [c.path for c in node.children] == ["/p/a", "/p/b"]
    assert [c.fact_count for c in node.children] == [2, 1]
    assert node.fact_count == 0


def test_two_concurrent_recalls_both_count(actor, rt) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        fact_id = fact_service.store_fact(conn, ctx, NewFact("/c", "contended")).id
    barrier = threading.Barrier(2)

    def recall() -> None:
        barrier.wait()
        Memory(rt).recall("default", fact_id)

    assert at_once([recall, recall]) == []
    with me.tx() as (conn, ctx):
        assert fact_service.get_fact(conn, ctx, fact_id, peek=True).recall_count == 2


def test_searches_recalling_overlapping_facts_at_once_never_deadlock(actor, rt) -> None:
    """A search's recalls are one UPDATE over its results. On PostgreSQL such UPDATEs
    locked rows in heap order, and 16 of them at once over overlapping facts deadlocked
    (a 500) about one in eight; in id order they queue instead, and every recall counts."""
    import random

    me = actor()
    with me.tx() as (conn, ctx):
        stored = [fact_service.store_fact(conn, ctx, NewFact("/c", f"n{n}")) for n in range(40)]
    ids = [fact.id for fact in stored]
    picks = [random.Random(seed).sample(ids, 3 + seed % 8) for seed in range(16 * 25)]

    def search_results(mine: list[list[int]]) -> None:
        for pick in mine:
            with me.tx() as (conn, ctx):
                assert len(fact_service.recall_visible(conn, ctx, pick)) == len(pick)

    assert at_once([partial(search_results, picks[n::16]) for n in range(16)]) == []
    with me.tx() as (conn, ctx):
        counted = sum(fact_service.get_fact(conn, ctx, i, peek=True).recall_count for i in ids)
    assert counted == sum(len(pick) for pick in picks)


def test_a_failure_after_the_fact_row_leaves_nothing(actor, monkeypatch) -> None:
    """One transaction: break the vector write (after fact, tags and FTS rows) and look."""
    me = actor()
    with me.tx() as (conn, ctx):
        before = (count(conn, facts), count(conn, fact_tags), count(conn, facts_vec))
        fts_before = backend(conn).keywords.document_frequency(conn, "phoenix")

    def broken(*_args, **_kwargs):
        raise RuntimeError("disk on fire")

    # The vector index's write comes last on both backends (SQLite's codes after the
    # UPDATE of the fact's embedding, PostgreSQL's facts_vec row after the fact's).
    monkeypatch.setattr(fact_service.vector_index, "write_codes", broken)
    with pytest.raises(RuntimeError), me.tx() as (conn, ctx):
        fact_service.store_fact(conn, ctx, NewFact("/crash", "phoenix"), vector=b"\0" * 256)
    with me.tx() as (conn, ctx):
        assert (count(conn, facts), count(conn, fact_tags), count(conn, facts_vec)) == before
        assert path_service.find_path_id(conn, "/crash") is None
        fts_after = backend(conn).keywords.document_frequency(conn, "phoenix")
        assert fts_after == fts_before == 0


def test_store_embeds_in_the_same_transaction(actor) -> None:
    import numpy as np

    me = actor()
    vector = np.ones(64, dtype="<f4") / 8
    with me.tx() as (conn, ctx):
        fact = fact_service.store_fact(conn, ctx, NewFact("/v", "x"), vector=vector.tobytes())
        pending = conn.execute(
            text("SELECT count(*) FROM facts WHERE embedding IS NULL AND id = :id"), {"id": fact.id}
        ).scalar()
        in_vec = conn.execute(
            text("SELECT count(*) FROM facts_vec WHERE fact_id = :id"), {"id": fact.id}
        ).scalar()
    assert fact.embedded is True
    assert pending == 0 and in_vec == 1


def test_content_limits(actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        limit = ctx.limits.content_chars
        for bad in ("", "   ", "x" * (limit + 1)):
            with pytest.raises(InvalidInput):
                fact_service.store_fact(conn, ctx, NewFact("/x", bad))
        with pytest.raises(InvalidInput, match="at most 32 tags"):
            fact_service.store_fact(
                conn, ctx, NewFact("/x", "x", {f"k{i}": "v" for i in range(33)})
            )


def test_context_is_plain_data(rt) -> None:
    with Memory(rt).transaction("default") as (_conn, ctx):
        assert isinstance(ctx, Context)
    assert ctx.access.is_admin


def test_neighbours_show_only_when_readable(actor) -> None:
    """Service level of the BOLA test: a pointer to a hidden fact is None, the flag stays,
    and history neither shows nor walks through the hidden fact."""
    from app.services import policies as policy_service

    with actor().tx() as (conn, ctx):
        policy_service.add_policy(conn, ctx, "p, bob, path:/open/*, read, allow")
        first = fact_service.store_fact(conn, ctx, NewFact("/open", "v1"))
        hidden = fact_service.store_fact(
            conn, ctx, NewFact("/closed", "v2", supersedes_id=first.id)
        )
        last = fact_service.store_fact(conn, ctx, NewFact("/open", "v3", supersedes_id=hidden.id))
        middle = fact_service.hydrate(conn, ctx, [hidden.id])[0]
    assert (middle.supersedes_id, middle.superseded_by_id) == (first.id, last.id)
    with actor("bob").tx() as (conn, ctx):
        old, new = fact_service.hydrate(conn, ctx, [first.id, last.id])
        chains = [fact_service.history(conn, ctx, fid) for fid in (first.id, last.id)]
        listing = fact_service.list_facts(conn, ctx, under="/open")
        with pytest.raises(NotFound):
            fact_service.history(conn, ctx, hidden.id)
    assert (old.superseded, old.superseded_by_id) == (True, None)
    assert (new.supersedes_id, new.superseded) == (None, False)
    assert [[f.id for f in chain] for chain in chains] == [[first.id], [last.id]]
    assert [f.id for f in listing.facts] == [last.id]


def _at_once(count: int, work) -> tuple[list, list[BaseException]]:
    """Run work(i) in `count` threads released together; results and errors."""
    barrier = threading.Barrier(count)
    results: list = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results.append(work(i))
        except BaseException as exc:  # surfaced to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def test_concurrent_supersedes_of_one_fact_give_exactly_one_successor(actor, rt) -> None:
    """No writer queue on PostgreSQL: the unique supersedes_id decides, not a read."""
    me = actor()
    with me.tx() as (conn, ctx):
        old = fact_service.store_fact(conn, ctx, NewFact("/race", "v1")).id
    results, errors = _at_once(
        6, lambda i: Memory(rt).store("default", NewFact("/race", f"v2 by {i}", supersedes_id=old))
    )
    assert len(results) == 1
    assert len(errors) == 5 and all(isinstance(e, Conflict) for e in errors), errors
    with me.tx() as (conn, ctx):
        superseded = fact_service.get_fact(conn, ctx, old, peek=True)
        chain = fact_service.history(conn, ctx, old)
    assert superseded.superseded_by_id == results[0].id
    assert sorted(f.id for f in chain) == [old, results[0].id]


def test_concurrent_stores_under_one_new_path_make_one_node(actor, rt) -> None:
    results, errors = _at_once(
        6, lambda i: Memory(rt).store("default", NewFact("/new/deep/node", f"fact {i}"))
    )
    assert errors == [] and len(results) == 6
    with actor().tx() as (conn, ctx):
        node = path_service.describe_path(conn, ctx, "/new/deep")
        assert [c.path for c in node.children] == ["/new/deep/node"]
        listed = fact_service.list_facts(conn, ctx, under="/new").facts
    assert sorted(f.content for f in listed) == sorted(f"fact {i}" for i in range(6))
