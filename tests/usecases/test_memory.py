"""The use-case layer itself: readiness, gauges, and the model the memory names."""

from __future__ import annotations

from app.db import migrate
from app.db.engine import write_transaction
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from app.usecases.memory import Check, Memory, ModelState, NewFact, Readiness
from tests.conftest import TEST_WIDTH, TINY


def test_readiness_names_the_model_and_says_the_index_is_loaded(rt: Runtime) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    memory = Memory(rt)
    head = migrate.head_revision()
    assert memory.readiness().index == Check(False, "the vector index is not loaded (see the log)")
    # (A store's `similar` search loads the index as any search does, before its insert.)
    memory.store("default", NewFact("/r", "embedded at once"))
    rt.load_vector_index()  # what the app's lifespan does before it takes a request
    assert memory.readiness() == Readiness(
        Check(True),
        Check(True, f"at head {head}"),
        ModelState(True, rt.embedder.name, None),
        Check(True, "loaded"),
    )


def test_a_model_the_memory_names_but_cannot_load_is_a_reason_not_a_failure(
    rt: Runtime,
) -> None:
    # Another process switched the memory to a model whose files are not here.
    with write_transaction(rt.engine) as conn:
        migrate.record_model(conn, TINY)
    memory = Memory(rt)
    model = memory.readiness().model
    assert (model.loaded, model.name) == (False, TINY)
    assert model.reason is not None and model.reason.startswith("unknown embedding model")
    # Stores go on, and the fact waits for a model.
    assert memory.store("default", NewFact("/r", "still stored")).embedded is False


def test_gauges_count_every_fact_whoever_may_read_it(rt: Runtime) -> None:
    memory = Memory(rt)
    memory.store("default", NewFact("/g", "one"))
    gone = memory.store("default", NewFact("/g", "two"))
    memory.delete("default", gone.id)
    gauges = memory.gauges()
    assert (gauges.facts, gauges.deleted, gauges.pending_embeddings) == (9, 1, 8)
    assert gauges.model_loaded is False and gauges.model_load_seconds is None


def test_a_hybrid_search_ranks_its_keyword_half_while_the_query_is_embedded(
    rt: Runtime, monkeypatch
) -> None:
    """The keyword half needs no vector: it runs on a worker thread, in a snapshot of
    its own, while the model embeds the query (the halves' times overlap, not add)."""
    import threading

    from app.services import search as search_service
    from app.usecases.memory import SearchRequest

    rt.embedder = FakeEmbedder(TEST_WIDTH)
    memory = Memory(rt)
    kept = memory.store("default", NewFact("/o", "the otter sleeps by the weir"))
    started, threads = threading.Event(), []
    real_half = search_service.keyword_half

    def keyword_half(conn, ctx, query):
        threads.append(threading.current_thread().name)
        started.set()
        return real_half(conn, ctx, query)

    class WaitsForTheKeywordHalf(FakeEmbedder):
        def embed_query(self, text: str):
            # Serial code would rank keyword after this returns: the wait would time out.
            assert started.wait(timeout=10), "the keyword half did not run meanwhile"
            return super().embed_query(text)

    monkeypatch.setattr(search_service, "keyword_half", keyword_half)
    rt.embedder = WaitsForTheKeywordHalf(TEST_WIDTH)
    page = memory.search("default", SearchRequest(q="otter weir", mode="hybrid", peek=True))
    assert page.results[0].fact.id == kept.id
    assert page.results[0].scores["words_held"] == 1.0 and "cosine" in page.results[0].scores
    assert threads and threads[0].startswith("search-half")
