"""Search through the service: keyword, semantic and hybrid, inside the subject's view."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DataError

from app.db.engine import write_transaction
from app.embeddings.fake import FakeEmbedder
from app.errors import InvalidInput, Unavailable
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services import ranking
from app.services import search as search_service
from app.services.facts import NewFact
from app.usecases.memory import SearchRequest
from tests.conftest import TEST_WIDTH
from tests.statements import executed

MODES = ("keyword", "semantic", "hybrid")
WORDS = ("hedge", "field", "barn", "river", "wood", "lane")


@pytest.fixture
def model(rt):
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    return rt.embedder


def store(actor_, items, embedder=None):
    with actor_.tx() as (conn, ctx):
        vectors = embedding_service.embed_for_store(embedder, [i.content for i in items])
        return fact_service.store_facts(conn, ctx, items, vectors=vectors)


def find(actor_, q, rt=None, **options):
    """Search as the actor through the use case (the model is the runtime's, if any)."""
    options["tags"] = tuple(options.get("tags") or ())
    return actor_.memory.search(actor_.subject, SearchRequest(q=q, **options))


def test_a_rare_exact_token_finds_its_fact_by_keyword(actor) -> None:
    me = actor()
    store(me, [NewFact("/tickets", f"routine maintenance note number {i}") for i in range(30)])
    target = store(me, [NewFact("/tickets", "the outage is tracked as OPS-48213 in the tracker")])
    found = find(me, "OPS-48213", mode="keyword")
    assert found.mode == "keyword"
    assert found.results[0].fact.id == target[0].id
    scores = found.results[0].scores
    assert scores["all_words"] is True and scores["words_held"] == 1.0
    assert scores["keyword"] == found.results[0].score > 0


@pytest.mark.only_backend("sqlite")  # SQLite's statement cache and FTS5's planner
def test_keyword_walks_keep_their_compiled_statement_between_searches(actor, rt, model) -> None:
    """SQLite passes a query's LIMIT to FTS5's planner, so a LIMIT bound as a parameter
    made the walk's statement stale on every bind: each search compiled it again (1.2 ms
    of a hybrid search at 10k facts). The walks' LIMIT is part of their text; the text is
    the same from one search to the next, so the compiled statement is reused."""
    me = actor()
    notes = [NewFact("/n", f"release note {i} about the billing export") for i in range(5)]
    store(me, notes, model)
    with executed(rt.engine, "MATCH") as seen:
        for q in ("release billing", "export note", "billing release"):
            for mode in MODES:
                assert find(me, q, mode=mode).results
    walks = [statement for statement, _ in seen]
    assert walks and all("LIMIT ?" not in w and "LIMIT 100" in w for w in walks), walks[0]
    assert len(set(walks)) == 1  # two words a query, in every mode: one text


@pytest.mark.parametrize(
    "hostile",
    [
        '"unbalanced',
        "((((",
        "a AND OR NOT b",
        "NEAR(a b, 3)",
        "col:value",
        "x*",
        "^start",
        "nul\x00byte",
        "'; DROP TABLE facts; --",
        "x" * 3000,
        " ".join(["word"] * 600),
        "-",
        '""',
    ],
)
def test_hostile_queries_give_results_or_a_clear_refusal(actor, hostile: str) -> None:
    me = actor()
    store(me, [NewFact("/h", "a word about start and value")])
    try:
        found = find(me, hostile, mode="keyword")
    except InvalidInput as exc:
        assert exc.status == 422
    else:
        assert isinstance(found.results, list)


def test_semantic_without_a_model_is_unavailable(actor) -> None:
    with pytest.raises(Unavailable, match="embedding model"):
        find(actor(), "anything", mode="semantic")


def test_default_mode_is_hybrid_with_a_model_else_keyword(actor, rt, model) -> None:
    me = actor()
    store(me, [NewFact("/m", "blue whales sing")], model)
    assert find(me, "whales").mode == "hybrid"
    rt.embedder = None
    assert find(me, "whales").mode == "keyword"


def test_no_model_then_reindex_finds_by_meaning(actor, rt) -> None:
    me = actor()
    stored = store(me, [NewFact("/later", "penguins waddle across the antarctic ice")])
    assert stored[0].embedded is False
    assert find(me, "penguins", mode="keyword").results[0].fact.id == stored[0].id
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    assert embedding_service.reindex(rt.engine, rt.embedder) >= 1
    found = find(me, "penguins waddle", rt=rt, mode="semantic")
    assert found.results[0].fact.id == stored[0].id
    assert found.results[0].fact.embedded is True


def test_one_visible_fact_in_ten_still_fills_the_page(actor, rt, model) -> None:
    me = actor()
    items = [
        NewFact(f"/team/g{i % 10}", f"shared topic alpha report {i}", {"group": f"g{i % 10}"})
        for i in range(300)
    ]
    store(me, items, model)
    with write_transaction(rt.engine) as conn:
        conn.execute(
            text(
                "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3) "
                "VALUES ('p', 'carol', 'tag:group=g3', 'read', 'allow')"
            )
        )
    carol = actor("carol")
    for mode in MODES:
        found = find(carol, "alpha report", rt=rt, mode=mode, limit=10, peek=True)
        groups = {r.fact.effective_tags["group"] for r in found.results}
        assert len(found.results) == 10, mode
        assert groups == {"g3"}, mode


@pytest.mark.only_backend("sqlite")  # the walk of the process's own index
def test_a_reader_who_saw_every_candidate_checks_fewer_the_next_time(
    actor, rt, model, monkeypatch
) -> None:
    """A walk's first chunk of candidates, checked in SQL, is sized by the share the
    same reader found visible in its last walk: a reader of everything checks 125 of
    hybrid's candidates where it checked 200, and gets the same page."""
    me = actor()
    notes = [NewFact("/notes", f"maintenance note {i} about topic {i % 17}") for i in range(400)]
    store(me, notes, model)
    checked: list[int] = []
    real = search_service._visible_vectors

    def counting(conn, scope, ids):
        checked.append(len(ids))
        return real(conn, scope, ids)

    monkeypatch.setattr(search_service, "_visible_vectors", counting)
    pages, checked_each = [], []
    for _ in range(2):
        checked.clear()
        found = find(me, "maintenance topic three", mode="hybrid", peek=True)
        pages.append([(r.fact.id, r.scores) for r in found.results])
        checked_each.append(sum(checked))
    assert tuple(checked_each) == (200, 125)
    assert len(pages[0]) == 10 and pages[0] == pages[1]


def test_filters_under_tag_and_min_strength(actor, clock) -> None:
    me = actor()
    store(me, [NewFact("/a/x", "gamma one", {"k": "v"}), NewFact("/b", "gamma two")])
    assert [r.fact.path for r in find(me, "gamma", under="/a").results] == ["/a/x"]
    assert [r.fact.path for r in find(me, "gamma", tags=["k=v"]).results] == ["/a/x"]
    clock.advance(days=3)
    assert find(me, "gamma", min_strength=0.5).results == []
    assert len(find(me, "gamma", min_strength=0.01, peek=True).results) == 2


def test_results_are_recalls_unless_peek(actor) -> None:
    me = actor()
    fact = store(me, [NewFact("/r", "delta facts recall")])[0]
    find(me, "delta", peek=True)
    with me.tx() as (conn, ctx):
        assert fact_service.get_fact(conn, ctx, fact.id, peek=True).recall_count == 0
    find(me, "delta")
    with me.tx() as (conn, ctx):
        assert fact_service.get_fact(conn, ctx, fact.id, peek=True).recall_count == 1


def test_superseded_and_deleted_facts_drop_out(actor) -> None:
    me = actor()
    old = store(me, [NewFact("/s", "epsilon version one")])[0]
    new = store(me, [NewFact("/s", "epsilon version two", supersedes_id=old.id)])[0]
    gone = store(me, [NewFact("/s", "epsilon removed")])[0]
    with me.tx() as (conn, ctx):
        fact_service.delete_fact(conn, ctx, gone.id)
    assert [r.fact.id for r in find(me, "epsilon").results] == [new.id]


def test_hybrid_puts_first_the_fact_both_halves_support(actor, rt, model) -> None:
    me = actor()
    facts = store(
        me,
        [
            NewFact("/z", "zeta keyword only ZX-9001"),
            NewFact("/z", "zeta meaning sibling"),
            NewFact("/z", "an unrelated line about lunch"),
        ],
        model,
    )
    found = find(me, "ZX-9001 zeta", rt=rt, mode="hybrid")
    top = found.results[0]
    assert top.fact.id == facts[0].id
    assert {"relevance", "keyword", "words_held", "cosine"} <= set(top.scores)
    assert top.score == top.scores["relevance"]
    scores = [r.score for r in found.results]
    assert scores == sorted(scores, reverse=True)
    assert facts[2].id not in {r.fact.id for r in found.results}  # neither half supports it


def test_hybrid_candidates_carry_every_feature_the_shipped_model_weighs(actor, model) -> None:
    """The fitted model and the search agree on what a feature is: each one it weighs is
    computed for every candidate, finite, and the neighbourhood's square is its square
    (bench.fit_ranking fitted the weights on these very arrays)."""
    me = actor()
    notes = [NewFact("/c", f"kestrel note {i} about the {w}") for i, w in enumerate(WORDS)]
    store(me, notes, model)
    found = me.memory.hybrid_candidates(me.subject, SearchRequest(q="kestrel about the hedge"))
    assert len(found.ids) == len(WORDS)
    assert set(ranking.shipped().features) <= set(found.features)
    for name in ranking.shipped().features:
        assert found.features[name].shape == (len(found.ids),)
        assert np.isfinite(found.features[name]).all(), name
    near = found.features["neighbourhood"]
    assert np.allclose(found.features["neighbourhood_squared"], near * near)
    assert len(set(np.round(near, 6))) > 1  # a test of the square needs more than one value


def test_crowd_is_how_much_closer_kin_a_candidate_has_than_the_others() -> None:
    """Each candidate's mean cosine to its KIN nearest other candidates, less the mean of
    that over the candidates: near-copies score above a fact that stands apart, and a
    lone candidate (or a page of few) is neither pushed down nor lifted."""
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(12, 16)).astype(np.float32)
    rows[1] = rows[0] + 0.05 * rows[1]  # a near-copy of the first
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    crowd = search_service._crowd(rows)
    likeness = rows @ rows.T
    expected = [np.sort(np.delete(likeness[i], i))[-search_service.KIN :].mean() for i in range(12)]
    assert np.allclose(crowd, np.array(expected) - np.mean(expected), atol=1e-6)
    assert crowd[0] > np.median(crowd) and crowd[1] > np.median(crowd)
    assert abs(crowd.mean()) < 1e-9
    # Fewer candidates than KIN + 1: every other one is kin; alone: nothing to be like.
    few = [np.delete(likeness[i, :3], i).mean() for i in range(3)]
    assert np.allclose(search_service._crowd(rows[:3]), np.array(few) - np.mean(few), atol=1e-6)
    assert search_service._crowd(rows[:1]).tolist() == [0.0]
    assert search_service._crowd(rows[:0]).shape == (0,)


# --- keyword pages: BM25 over the reader's own matches --------------------------------


def grant(rt, *lines: str) -> None:
    with write_transaction(rt.engine) as conn:
        for line in lines:
            ptype, *values = [v.strip() for v in line.split(",")]
            conn.execute(
                text("INSERT INTO casbin_rule (ptype, v0, v1, v2, v3) VALUES (:p, :a, :b, :c, :d)"),
                dict(zip("pabcd", (ptype, *values), strict=True)),
            )


def page(found) -> list[tuple[int, dict]]:
    return [(r.fact.id, r.scores) for r in found.results]


def test_keyword_ranks_facts_holding_every_word_before_those_holding_some(actor) -> None:
    me = actor()
    both = store(me, [NewFact("/k", f"glacier retreat survey {i}") for i in range(3)])
    some = store(
        me,
        [NewFact("/k", f"glacier photo {i}") for i in range(4)]
        + [NewFact("/k", f"retreat booking {i}") for i in range(4)],
    )
    store(me, [NewFact("/k", "the sea or the sky")])  # shares only stop words
    found = find(me, "the glacier or the retreat", mode="keyword", limit=10, peek=True)
    results = found.results
    assert len(results) == 10  # 11 facts share a content word: the page is full
    assert {r.fact.id for r in results[:3]} == {f.id for f in both}
    assert [r.scores["all_words"] for r in results] == [True] * 3 + [False] * 7
    assert {r.fact.id for r in results[3:]} < {f.id for f in some}
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_a_rarer_word_weighs_more_among_the_readers_matches(actor) -> None:
    me = actor()
    rare = store(me, [NewFact("/k", "kestrel seen over the field")])[0]
    store(me, [NewFact("/k", f"field notes day {i}") for i in range(8)])
    found = find(me, "kestrel field", mode="keyword", limit=3, peek=True)
    assert found.results[0].fact.id == rare.id
    # A fact holding only the common word holds less of the question.
    assert found.results[1].scores["words_held"] < found.results[0].scores["words_held"] == 1.0


def test_a_stop_word_overlap_never_matches(actor) -> None:
    me = actor()
    store(me, [NewFact("/s", "tea or coffee for the team"), NewFact("/s", "what it is")])
    assert find(me, "the zebra or a giraffe", mode="keyword").results == []
    assert find(me, "what's the zebra's name?", mode="keyword").results == []
    # Stop words alone still find what holds them.
    assert find(me, "what it is", mode="keyword").results[0].scores["all_words"] is True


def test_a_long_query_looks_up_its_longest_words_once_each() -> None:
    q = "a b cc dd eee ffff ggggg hhhhhh iiiiiii jjjjjjjj kkkkkkkkk cc the"
    terms = search_service.query_terms(q)
    # The longest six, in the query's order.
    assert terms == ("ffff", "ggggg", "hhhhhh", "iiiiiii", "jjjjjjjj", "kkkkkkkkk")
    # Among words of one length, the first ones.
    assert search_service.query_terms("gg aa bb cc dd ee ff") == (
        "gg",
        "aa",
        "bb",
        "cc",
        "dd",
        "ee",
    )
    assert len(terms) == search_service.MAX_TERMS


def test_keyword_fills_only_with_facts_the_reader_may_see(actor, rt) -> None:
    me = actor()
    mine = store(me, [NewFact("/mine/a", "orchid care"), NewFact("/mine/b", "orchid light")])
    store(me, [NewFact("/theirs", f"orchid care notes {i}") for i in range(20)])
    grant(rt, "p, alice, path:/mine/*, read, allow")
    found = find(actor("alice"), "orchid care", mode="keyword", limit=10, peek=True)
    assert [r.fact.id for r in found.results] == [mine[0].id, mine[1].id]
    assert [r.scores["all_words"] for r in found.results] == [True, False]


def test_a_common_word_past_its_window_still_counts_for_an_older_fact(actor) -> None:
    """A word that more than MATCH_WINDOW visible facts hold is read newest first, up to
    the window: an older fact found by its rare word still holds the common one."""
    me = actor()
    answer = store(me, [NewFact("/chat/s1", "Caroline: I researched adoption agencies today")])
    store(
        me,
        [NewFact("/chat/s2", f"Caroline: chatting about day {i}") for i in range(150)],
    )
    found = find(me, "What did Caroline learn about adoption?", mode="keyword", peek=True)
    assert found.results[0].fact.id == answer[0].id
    assert found.results[0].scores["all_words"] is False  # "learn" is held by none
    assert found.results[0].scores["words_held"] > found.results[1].scores["words_held"]


# --- nothing the reader cannot see moves a page ------------------------------------------


def pages(actor_, rt, q: str) -> dict[str, list[tuple[int, float, dict]]]:
    """The reader's page in every mode: ids, order, and every score."""
    out = {}
    for mode in MODES:
        found = find(actor_, q, rt=rt, mode=mode, limit=10, peek=True)
        out[mode] = [(r.fact.id, r.score, r.scores) for r in found.results]
    return out


def test_a_thousand_facts_the_reader_cannot_see_change_nothing_of_its_pages(
    actor, rt, model, clock
) -> None:
    """Hidden facts of another subject, the reader's own deleted facts, and facts of the
    reader's superseded by a successor it cannot see, all holding the query's words:
    every page, in every mode, byte for byte the same (ids, order, every score)."""
    owner = actor()
    grant(rt, "p, alice, path:/alice/*, read, allow", "p, alice, path:/alice/*, write, allow")
    grant(rt, "p, alice, path:/alice/*, delete, allow")
    alice = actor("alice")
    topics = ("lantern harbor", "harbor quay", "lantern tide", "kelp and quay", "old pier")
    store(alice, [NewFact("/alice/log", f"{t} note {i}") for i, t in enumerate(topics)], model)
    clock.advance(days=1)
    questions = ("lantern harbor", "what about the harbor quay", "pier tide kelp")
    before = {q: pages(alice, rt, q) for q in questions}
    assert all(before[q]["keyword"] for q in questions)
    clock.advance(days=-1)
    hidden = [NewFact("/bob", f"harbor lantern quay pier {i}") for i in range(400)]
    hidden += [NewFact("/bob", f"{t}") for t in topics for _ in range(40)]  # word for word
    store(owner, hidden, model)
    doomed = store(
        alice, [NewFact("/alice/log", f"lantern harbor tide {i}") for i in range(200)], model
    )
    with alice.tx() as (conn, ctx):
        for fact in doomed:
            fact_service.delete_fact(conn, ctx, fact.id)
    replaced = store(
        alice, [NewFact("/alice/old", f"quay pier kelp {i}") for i in range(200)], model
    )
    store(
        owner,
        [
            NewFact("/bob/new", f"pier kelp quay {i}", supersedes_id=f.id)
            for i, f in enumerate(replaced)
        ],
        model,
    )
    clock.advance(days=1)
    for q in questions:
        assert pages(alice, rt, q) == before[q], q


def test_fifty_one_word_probes_learn_nothing_of_a_hidden_fact(actor, rt, model) -> None:
    """The attack that found FTS5's whole-index bm25: a reader stores fifty one-word
    facts and searches them all at once; a hidden fact holding one of the words (and a
    deleted one, and one superseded out of sight) must not move that word's place."""
    grant(
        rt, "p, mallory, path:/mallory/*, read, allow", "p, mallory, path:/mallory/*, write, allow"
    )
    mallory, owner = actor("mallory"), actor()
    words = [f"probe{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(50)]
    store(mallory, [NewFact("/mallory/p", w) for w in words], model)
    question = " ".join(words)
    before = pages(mallory, rt, question)
    secret = store(owner, [NewFact("/vault", f"the code is {words[17]} now")], model)[0]
    gone = store(owner, [NewFact("/vault", f"old code {words[3]}")], model)[0]
    with owner.tx() as (conn, ctx):
        fact_service.delete_fact(conn, ctx, gone.id)
    store(owner, [NewFact("/vault", f"newer code {words[40]}", supersedes_id=secret.id)], model)
    assert pages(mallory, rt, question) == before


@pytest.mark.parametrize("peek", [False, True])
def test_a_fact_deleted_or_hidden_after_ranking_is_not_handed_out(actor, rt, peek) -> None:
    """Ranking reads one snapshot and the page is delivered in the next transaction:
    what changed between them is checked again, and nothing hidden is counted."""
    owner, alice = actor(), actor("alice")
    kept, deleted, hidden = store(
        owner,
        [
            NewFact("/open/kept", "zeta marker kept"),
            NewFact("/open/deleted", "zeta marker deleted"),
            NewFact("/open/hidden", "zeta marker hidden"),
        ],
    )
    grant(rt, "p, alice, path:/open/*, read, allow")
    query = search_service.prepare(q="zeta marker", embedder=None, mode="keyword")
    with alice.memory.transaction("alice") as (conn, ctx):
        ranking = search_service.rank(conn, ctx, query, rt.vector_index)
    assert {fid for fid, _ in ranking.order} == {kept.id, deleted.id, hidden.id}
    with owner.tx() as (conn, ctx):
        fact_service.delete_fact(conn, ctx, deleted.id)
    grant(rt, "p, alice, path:/open/hidden, read, deny")
    with alice.tx() as (conn, ctx):
        page = search_service.deliver(conn, ctx, ranking, peek=peek)
    assert [r.fact.id for r in page.results] == [kept.id]
    with owner.tx() as (conn, ctx):
        counts = {
            fid: fact_service.get_fact(conn, ctx, fid, peek=True, include_deleted=True).recall_count
            for fid in (kept.id, deleted.id, hidden.id)
        }
    assert counts == {kept.id: 0 if peek else 1, deleted.id: 0, hidden.id: 0}


def test_filters_kept_for_one_request_do_not_leak_into_the_next(actor, clock) -> None:
    """Statements are built once per subject and filters and reused: a request with
    other filters (or the same, later) gets its own, right, answer."""
    me = actor()
    store(
        me,
        [
            NewFact("/a/x", "omega note one", {"kind": "a"}),
            NewFact("/b/y", "omega note two", {"kind": "b"}),
        ],
    )
    for _ in range(2):
        assert [r.fact.path for r in find(me, "omega", mode="keyword", under="/a").results] == [
            "/a/x"
        ]
        assert [r.fact.path for r in find(me, "omega", mode="keyword", under="/b").results] == [
            "/b/y"
        ]
        only_b = find(me, "omega", mode="keyword", tags=["kind=b"]).results
        assert [r.fact.path for r in only_b] == ["/b/y"]
        assert len(find(me, "omega", mode="keyword").results) == 2


# --- hybrid: candidates, features, the fitted model's page --------------------------------


def test_a_time_span_in_the_question_moves_a_dated_fact_up(actor, rt, model, clock) -> None:
    me = actor()
    store(me, [NewFact("/log", f"went hiking with friends, trail {i}") for i in range(6)], model)
    clock.advance(days=30)
    recent = store(me, [NewFact("/log", "went hiking with friends, trail 9")], model)[0]
    clock.advance(days=3)
    dated = find(me, "hiking with friends last week", rt=rt, mode="hybrid", peek=True)
    assert dated.results[0].fact.id == recent.id
    assert dated.results[0].scores["in_window"] is True
    assert all("in_window" not in r.scores for r in dated.results[1:])


def test_a_fact_of_the_named_span_that_neither_half_reaches_still_makes_the_page(
    actor, rt, model, clock, monkeypatch
) -> None:
    """Thirty older facts hold every word of the question and stand nearer it, and each
    half reads twenty: the one fact created last week (longer, farther) is found by the
    span's own nearest facts; a hidden fact of the same week changes nothing."""
    monkeypatch.setattr(search_service, "SEMANTIC_DEPTH", 20)
    monkeypatch.setattr(search_service, "KEYWORD_DEPTH", 20)
    me = actor()
    store(me, [NewFact("/log", f"went hiking with friends, trail {i}") for i in range(30)], model)
    clock.advance(days=30)
    long_one = "we went hiking with old friends by the creek and it rained all day"
    recent = store(me, [NewFact("/log", long_one)], model)[0]
    clock.advance(days=3)
    question = "hiking with friends last week"
    with me.tx() as (conn, ctx):
        query = search_service.embed(
            search_service.prepare(q="hiking with friends", embedder=model, mode="hybrid"), model
        )
        plain = search_service.candidates(
            query,
            search_service.keyword_half(conn, ctx, query),
            search_service.semantic_half(conn, ctx, query, rt.vector_index),
        )
    assert recent.id not in plain.ids
    dated = find(me, question, rt=rt, mode="hybrid", peek=True)
    found = {r.fact.id: r.scores for r in dated.results}
    assert recent.id in found and found[recent.id]["in_window"] is True
    grant(rt, "p, default, path:/hidden/*, read, deny")
    clock.advance(days=-3)  # the moment `recent` was stored
    store(me, [NewFact("/hidden", "went hiking with friends by the creek")], model)
    clock.advance(days=3)
    assert page(find(me, question, rt=rt, mode="hybrid", peek=True)) == page(dated)


def test_semantic_candidates_under_the_floor_are_no_match(actor, rt, model) -> None:
    me = actor()
    store(me, [NewFact("/z", "penguins waddle across the antarctic ice")], model)
    for mode in ("semantic", "hybrid"):
        assert find(me, "quarterly invoice reconciliation", rt=rt, mode=mode).results == []
    assert find(me, "penguins waddle", rt=rt, mode="semantic").results


def test_a_nonsense_query_gets_an_empty_page_and_recalls_nothing(actor, rt, model) -> None:
    me = actor()
    facts = store(
        me,
        [NewFact("/n", f"{w} notes for the week") for w in ("garden", "invoice", "boiler")],
        model,
    )
    for mode in MODES:
        assert find(me, "qwxz blorp frindle", rt=rt, mode=mode).results == [], mode
    with me.tx() as (conn, ctx):
        counts = [fact_service.get_fact(conn, ctx, f.id, peek=True).recall_count for f in facts]
    assert counts == [0, 0, 0]


@pytest.mark.parametrize(
    "q",
    [
        "what happened 3000000 days ago",
        "notes from 99999999999 years ago",
        "the plan on December 31st 9999",
        "anything in December 9999",
        "since January 0001",
        "the last 99999999999 years",
    ],
)
def test_a_time_span_beyond_any_date_is_a_search_like_any_other(actor, rt, model, q) -> None:
    me = actor()
    store(me, [NewFact("/t", "the plan for the garden")], model)
    for mode in MODES:
        find(me, q, rt=rt, mode=mode, peek=True)  # no exception: clamped to what a date holds


def test_words_held_is_the_same_in_every_process() -> None:
    """Sums over words in a set's order could differ in their last bit from one process
    to the next (str hashes are salted) and flip a tie; fsum's cannot."""
    script = (
        "from app.services.ranking import rarity, words_held\n"
        "words = ['harbor', 'lantern', 'dock', 'quay', 'pier', 'tide', 'mooring', 'buoy']\n"
        "idf = rarity({w: i + 1 for i, w in enumerate(words)}, 40)\n"
        "print(repr([words_held(tuple(set(words[i:])), idf) for i in range(8)]))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(outputs) == 1, outputs


# --- hybrid's halves at once where the database server runs both --------------------------


def halves_corpus(me, model):
    return store(
        me,
        [
            NewFact("/h", f"harbour log {n}: the ferry {'left late' if n % 3 else 'sank'}")
            for n in range(40)
        ]
        + [NewFact("/h", "the ferry timetable changes in spring"), NewFact("/h", "lunch was soup")],
        model,
    )


def test_a_hybrid_page_is_the_one_a_single_snapshot_ranks(actor, rt, model) -> None:
    """However the use case runs the halves (side by side on PostgreSQL), the page is the
    one the service ranks with both halves in one snapshot: the same ids, order, scores."""
    me = actor()
    halves_corpus(me, model)
    for q in ("ferry left late", "when does the timetable change", "soup"):
        page = find(me, q, rt=rt, mode="hybrid", peek=True)
        query = search_service.prepare(q=q, embedder=model, mode="hybrid")
        with me.memory.transaction(me.subject) as (conn, ctx):
            expected = search_service.rank(conn, ctx, query, rt.vector_index)
        assert [(r.fact.id, r.score, r.scores) for r in page.results] == [
            (fid, score, expected.scores[fid]) for fid, score in expected.order
        ], q


@pytest.mark.only_backend("postgresql")
def test_on_postgresql_the_keyword_half_runs_beside_the_semantic_half(
    actor, rt, model, monkeypatch
) -> None:
    me = actor()
    halves_corpus(me, model)
    seen: dict[str, tuple[object, object]] = {}
    halves = {"keyword": search_service.keyword_half, "semantic": search_service.semantic_half}

    def watched(name):
        def half(conn, *args):
            seen[name] = (threading.current_thread(), conn.connection.driver_connection)
            return halves[name](conn, *args)

        return half

    monkeypatch.setattr(search_service, "keyword_half", watched("keyword"))
    monkeypatch.setattr(search_service, "semantic_half", watched("semantic"))
    assert find(me, "ferry left late", rt=rt, mode="hybrid", peek=True).results
    (keyword_thread, keyword_conn), (semantic_thread, semantic_conn) = (
        seen["keyword"],
        seen["semantic"],
    )
    assert semantic_thread is threading.current_thread()
    assert keyword_thread is not semantic_thread  # a thread of the runtime's side work
    assert keyword_conn is not semantic_conn  # each half in a snapshot of its own


@pytest.mark.only_backend("postgresql")
@pytest.mark.parametrize("failing", ["keyword", "semantic"])
def test_a_failing_half_fails_the_search_and_leaves_no_connection_out(
    actor, rt, model, monkeypatch, failing
) -> None:
    me = actor()
    halves_corpus(me, model)
    name = f"{failing}_half"

    def broken(conn, *args):
        conn.exec_driver_sql("SELECT 1/0")  # a database error, in the half's snapshot

    monkeypatch.setattr(search_service, name, broken)
    with pytest.raises(DataError, match="division by zero"):  # the half's own error
        find(me, "ferry left late", rt=rt, mode="hybrid", peek=True)
    assert rt.engine.pool.checkedout() == 0
    # The other half's thread is done too: the next search runs as usual.
    monkeypatch.undo()
    rt.embedder = model
    assert find(me, "ferry left late", rt=rt, mode="hybrid", peek=True).results
