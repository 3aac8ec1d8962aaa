"""`similar` on store: the facts a store is near, that its writer can read (SPEC)."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import func, select

from app.db.dialects import backend as backend_of
from app.db.tables import facts
from app.embeddings.fake import FakeEmbedder
from app.errors import Conflict
from app.services import search as search_service
from app.usecases.memory import Memory, NewFact, Similar
from tests.conftest import TEST_WIDTH, CountingEmbedder
from tests.services.test_search import grant
from tests.statements import executed

BACKUP = "the staging database is backed up every night at two"


@pytest.fixture
def model(rt):
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    return rt.embedder


def count(rt) -> int:
    with rt.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(facts)).scalar_one()


def test_a_near_duplicate_names_the_earlier_fact_and_an_unrelated_one_does_not(
    actor, model
) -> None:
    me = actor()
    first = me.memory.store(me.subject, NewFact("/ops", BACKUP))
    assert first.similar == [] and first.similar_checked is True
    again = me.memory.store(
        me.subject, NewFact("/ops/db", "every night at two the staging database is backed up")
    )
    assert [(s.id, s.path) for s in again.similar] == [(first.id, "/ops")]
    assert again.similar[0].cosine >= 0.63
    other = me.memory.store(me.subject, NewFact("/ops", "the office plants need water on fridays"))
    assert other.similar == [] and other.similar_checked is True


def test_at_most_three_nearest_first_and_never_the_superseded_one(actor, model) -> None:
    me = actor()
    olds = [me.memory.store(me.subject, NewFact("/d", BACKUP + "!" * i)) for i in range(5)]
    fresh = me.memory.store(me.subject, NewFact("/d", BACKUP))
    assert len(fresh.similar) == 3
    cosines = [s.cosine for s in fresh.similar]
    assert cosines == sorted(cosines, reverse=True)
    # A correction of a fact is near it by nature: that one is not a duplicate.
    fix = me.memory.store(me.subject, NewFact("/d", BACKUP + " (fixed)", supersedes_id=olds[0].id))
    assert olds[0].id not in {s.id for s in fix.similar}


def test_a_similar_fact_the_writer_cannot_read_is_never_named(actor, rt, model) -> None:
    owner = actor()
    hidden = owner.memory.store(owner.subject, NewFact("/private", BACKUP))
    grant(rt, "p, alice, path:/alice/*, write, allow", "p, alice, path:/alice/*, read, allow")
    alice = actor("alice")
    mine = alice.memory.store("alice", NewFact("/alice", BACKUP))
    assert mine.similar == [] and mine.similar_checked is True
    with pytest.raises(Conflict) as caught:
        alice.memory.store("alice", NewFact("/alice", BACKUP), on_duplicate="refuse")
    # Refused for her own visible copy; the hidden one is never named.
    assert f"fact {mine.id} at /alice" in caught.value.detail
    assert caught.value.detail.startswith(f"this fact is similar to fact {mine.id} at /alice ")
    assert hidden.id != mine.id


def test_refuse_writes_nothing_and_names_the_visible_fact(actor, rt, model) -> None:
    me = actor()
    first = me.memory.store(me.subject, NewFact("/ops", BACKUP))
    before = count(rt)
    with pytest.raises(Conflict) as caught:
        me.memory.store(me.subject, NewFact("/ops", BACKUP), on_duplicate="refuse")
    assert f"fact {first.id} at /ops" in caught.value.detail
    assert count(rt) == before
    # A batch is all or nothing: one near duplicate refuses every fact of it.
    batch = [NewFact("/new", "the office plants need water"), NewFact("/ops", BACKUP)]
    with pytest.raises(Conflict, match="fact 1 of the batch"):
        me.memory.store_batch(me.subject, batch, on_duplicate="refuse")
    assert count(rt) == before
    stored = me.memory.store_batch(me.subject, batch)
    assert [s.similar_checked for s in stored] == [True, True]
    assert [[x.id for x in s.similar] for s in stored] == [[], [first.id]]


def test_refusing_stores_at_once_store_one_copy(actor, rt, model, monkeypatch) -> None:
    """Stores of one text at the same moment, each refusing a duplicate: one is stored,
    the others refused. They all finish embedding before any looks (a barrier), where
    a look in a snapshot before the write let every one of them pass."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from app.usecases import memory as memory_module

    writers = 4
    together = threading.Barrier(writers, timeout=30)
    embed = memory_module.embed_for_store

    def embed_then_wait(*args, **kwargs):
        vectors = embed(*args, **kwargs)
        together.wait()
        return vectors

    monkeypatch.setattr(memory_module, "embed_for_store", embed_then_wait)
    me = actor()
    before = count(rt)

    def store(_: int) -> str:
        try:
            me.memory.store(me.subject, NewFact("/ops", BACKUP), on_duplicate="refuse")
        except Conflict:
            return "refused"
        return "stored"

    with ThreadPoolExecutor(writers) as pool:
        outcomes = sorted(pool.map(store, range(writers)))
    assert outcomes == ["refused"] * (writers - 1) + ["stored"]
    assert count(rt) == before + 1


def test_without_a_model_nothing_is_checked(actor) -> None:
    me = actor()
    me.memory.store(me.subject, NewFact("/ops", BACKUP))
    again = me.memory.store(me.subject, NewFact("/ops", BACKUP), on_duplicate="refuse")
    assert again.similar == [] and again.similar_checked is False


def test_the_threshold_is_a_setting(actor, rt, model) -> None:
    me = actor()
    me.memory.store(me.subject, NewFact("/ops", BACKUP))
    strict = rt.settings.search.model_copy(update={"similar_threshold": 0.9999})
    rt.settings = rt.settings.model_copy(update={"search": strict})
    near = me.memory.store(
        me.subject, NewFact("/ops", "every night at two the staging database is backed up daily")
    )
    assert near.similar == [] and near.similar_checked is True


def test_a_fact_hidden_since_the_search_is_not_named(actor, rt, model, monkeypatch) -> None:
    """The near facts are found in a read snapshot, the store writes in a later
    transaction: the names are checked again there, under its rules. (A store that
    refuses duplicates looks in the write transaction itself.)"""
    owner = actor()
    hidden = owner.memory.store(owner.subject, NewFact("/private", BACKUP))
    grant(rt, "p, alice, path:/alice/*, write, allow", "p, alice, path:/alice/*, read, allow")
    seen = Similar(hidden.id, "/private", 0.99)  # as if she could read it when it ran
    monkeypatch.setattr(Memory, "_similar_batch", lambda *_args, **_kwargs: [[seen]])
    alice = actor("alice")
    stored = alice.memory.store("alice", NewFact("/alice", BACKUP))
    assert stored.similar == [] and stored.similar_checked is True


def test_the_similar_search_uses_the_vector_the_store_made(actor, rt) -> None:
    """No second embedding: each stored fact is embedded once, and its `similar` search
    runs on that vector (the model is the slow part of a store)."""
    counting = rt.embedder = CountingEmbedder(TEST_WIDTH)
    me = actor()
    me.memory.store(me.subject, NewFact("/ops", BACKUP))
    stored = me.memory.store_batch(
        me.subject,
        [
            NewFact("/ops/db", "every night at two the staging database is backed up"),
            NewFact("/ops", "the office plants need water on fridays"),
        ],
    )
    assert [len(s.similar) for s in stored] == [1, 0]
    assert (len(counting.documents), len(counting.queries)) == (3, 0)


WORDS = (  # noqa: SIM905 - a sentence reads better than twenty quoted words
    "backup staging database night nightly restore replica primary disk volume "
    "office plants water friday invoice client contract deadline review release"
).split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7)))


def one_search_each(conn, ctx, rt, vectors, want, excludes):
    """What a store found before batching: one nearest-neighbour search per fact, as
    semantic search runs it (SQLite's walk of the index, PostgreSQL's HNSW walk)."""
    scope = search_service.Scope(ctx)
    found = []
    for vector, exclude in zip(vectors, excludes, strict=True):
        depth = want + len(exclude)
        if backend_of(conn).vectors.in_database:
            nearest = backend_of(conn).vectors.nearest(conn, scope.clauses(), vector, depth)
        else:
            nearest = search_service.semantic_ranking(conn, scope, rt.vector_index, vector, depth)
        found.append([(fid, 1.0 - d) for fid, d in nearest if fid not in exclude][:want])
    return found


def test_a_batch_names_the_facts_and_cosines_a_search_per_fact_names(actor, rt, model) -> None:
    """One pass for the whole batch (similar_to_many) finds, for each fact, what a search
    of its own finds: the same facts in the same order with the same cosines, under the
    reader's rules (a reader who sees most facts, and one who sees three, whose walks
    must fall back to scoring every fact it sees), past the group size, with the fact a
    store supersedes left out."""
    rng = random.Random(33)
    owner = actor()
    stored = owner.memory.store_batch(
        owner.subject,
        [NewFact(f"/shared/t{k % 7}" if k % 5 else "/private", sentence(rng)) for k in range(240)],
    )
    for old in stored[:20]:  # superseded and deleted facts are never named
        owner.memory.store(
            owner.subject, NewFact("/shared/t0", sentence(rng), supersedes_id=old.id)
        )
    for gone in stored[20:30]:
        owner.memory.delete(owner.subject, gone.id)
    grant(
        rt,
        "p, alice, path:/shared/*, read, allow",
        "p, bob, path:/shared/t3, read, allow",
        "p, bob, tag:owner=nobody, read, allow",
    )
    asked = [sentence(rng) for _ in range(search_service.SIMILAR_GROUP + 40)]
    vectors = list(model.embed_documents(asked))
    shared = [f.id for f in stored if f.path.startswith("/shared")]
    excludes = [frozenset({shared[k]}) if k % 9 == 0 else frozenset() for k in range(len(asked))]
    found_by = {}
    for subject in ("alice", "bob", "default"):
        with actor(subject).tx() as (conn, ctx):
            expected = one_search_each(conn, ctx, rt, vectors, 3, excludes)
            got = search_service.similar_to_many(
                conn, ctx, rt.vector_index, vectors, want=3, min_cosine=-1.0, excludes=excludes
            )
        assert got == expected, subject
        assert all(len(found) == 3 for found in got), subject
        found_by[subject] = got
    # The floor drops the far ones, as one search's does.
    with actor("alice").tx() as (conn, ctx):
        floored = search_service.similar_to_many(
            conn, ctx, rt.vector_index, vectors, want=3, min_cosine=0.6, excludes=excludes
        )
    assert floored == [[(f, c) for f, c in found if c >= 0.6] for found in found_by["alice"]]
    assert any(floored) and not all(len(found) == 3 for found in floored)


def test_a_batchs_similar_search_takes_a_few_statements_not_one_per_fact(actor, rt, model) -> None:
    owner = actor()
    rng = random.Random(6)
    owner.memory.store_batch(owner.subject, [NewFact("/a", sentence(rng)) for _ in range(150)])
    vectors = list(model.embed_documents([sentence(rng) for _ in range(200)]))
    with executed(rt.engine) as statements, owner.tx() as (conn, ctx):
        found = search_service.similar_to_many(
            conn,
            ctx,
            rt.vector_index,
            vectors,
            want=3,
            min_cosine=-1.0,
            excludes=[frozenset()] * len(vectors),
        )
    assert [len(f) for f in found] == [3] * len(vectors)
    groups = -(-len(vectors) // search_service.SIMILAR_GROUP)
    # SQLite: the index's catch-up, and a group's candidates checked at once; PostgreSQL:
    # the walk's two settings and a group's walks in one statement.
    assert len(statements) <= 3 * groups + 2, statements


def test_a_batch_of_stores_names_what_each_would_be_told_alone(actor, rt, model) -> None:
    """Through the use case: each fact of a batch is told of the facts a store of it
    alone, just before, would name (the console's look before a store)."""
    rng = random.Random(7)
    me = actor()
    me.memory.store_batch(me.subject, [NewFact("/n", sentence(rng)) for _ in range(120)])
    items = [NewFact("/n", sentence(rng)) for _ in range(80)]
    alone = [me.memory.similar_to_new(me.subject, item) for item in items]
    stored = me.memory.store_batch(me.subject, items)
    assert [s.similar for s in stored] == alone
    assert sum(1 for found in alone if found) > 10
