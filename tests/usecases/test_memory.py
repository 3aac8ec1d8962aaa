"""The use-case layer itself: readiness, gauges, and the model the memory names."""

from __future__ import annotations

from app.db import migrate
from app.db.engine import write_transaction
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime, open_runtime
from app.settings import EmbeddingSettings, Settings
from app.usecases.memory import Check, Memory, ModelState, NewFact, Readiness
from tests.conftest import TEST_WIDTH, TINY, same_memory


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
    settings: Settings,
) -> None:
    # A process configured with a model (not `none`, which follows nothing) ...
    named = same_memory(settings, embedding={"model": EmbeddingSettings().model})
    rt = open_runtime(named)
    try:
        # ... and another process switched the memory to a model whose files are not here.
        with write_transaction(rt.engine) as conn:
            migrate.record_model(conn, TINY)
        memory = Memory(rt)
        model = memory.readiness().model
        assert (model.loaded, model.name) == (False, TINY)
        assert model.reason is not None and model.reason.startswith("unknown embedding model")
        # Stores go on, and the fact waits for a model.
        assert memory.store("default", NewFact("/r", "still stored")).embedded is False
    finally:
        rt.close()


def test_gauges_count_every_fact_whoever_may_read_it(rt: Runtime) -> None:
    memory = Memory(rt)
    memory.store("default", NewFact("/g", "one"))
    gone = memory.store("default", NewFact("/g", "two"))
    memory.delete("default", gone.id)
    gauges = memory.gauges()
    assert (gauges.facts, gauges.deleted, gauges.pending_embeddings) == (9, 1, 8)
    assert gauges.model_loaded is False and gauges.model_load_seconds is None


def test_a_hybrid_search_runs_the_model_with_no_connection_held(rt: Runtime) -> None:
    """The model embeds the query before any transaction opens (a search never holds the
    database while the model runs); then one snapshot ranks both halves, and the page
    is handed out in a second transaction."""
    from sqlalchemy import event

    from app.usecases.memory import SearchRequest

    memory = Memory(rt)
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    kept = memory.store("default", NewFact("/o", "the otter sleeps by the weir"))
    held_while_embedding: list[int] = []

    class Watched(FakeEmbedder):
        def embed_query(self, text: str):
            held_while_embedding.append(rt.engine.pool.checkedout())
            return super().embed_query(text)

    rt.embedder = Watched(TEST_WIDTH)
    begun: list[str] = []
    event.listen(rt.engine, "begin", lambda conn: begun.append("begin"))
    page = memory.search("default", SearchRequest(q="otter weir", mode="hybrid", peek=True))
    assert page.results[0].fact.id == kept.id
    assert page.results[0].scores["words_held"] == 1.0 and "cosine" in page.results[0].scores
    assert held_while_embedding == [0]
    assert len(begun) == 2
