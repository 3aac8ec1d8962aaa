"""Width agreement between config, meta and the model; reindex --rebuild; resumable reindex.

A tiny generated ONNX model goes through the real loader where meaning is not the point.
"""

from __future__ import annotations

import pytest

from app.db.engine import read_transaction, write_transaction
from app.db.migrate import stored_width
from app.embeddings.fake import FakeEmbedder
from app.embeddings.loader import load_model
from app.errors import StartupError
from app.runtime import open_runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services.facts import NewFact
from app.usecases.memory import Memory
from tests.conftest import TEST_WIDTH, TINY, same_memory


def test_start_refuses_a_model_of_another_width_naming_three_numbers(settings, tiny_model):
    # config and meta say 64; the model gives 32.
    with pytest.raises(StartupError) as caught:
        open_runtime(
            same_memory(settings, embedding={"model": TINY, "width": TEST_WIDTH}),
            load_model=True,
        )
    message = caught.value.detail
    assert f"config says {TEST_WIDTH}" in message
    assert f"(meta) holds {TEST_WIDTH}" in message
    assert "model gives 32" in message


def test_reindex_rebuild_moves_the_memory_to_the_new_width(settings, tiny_model):
    rt = open_runtime(settings)
    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        vectors = embedding_service.embed_for_store(FakeEmbedder(TEST_WIDTH), ["old width"])
        fact_service.store_fact(conn, ctx, NewFact("/w", "old width"), vector=vectors[0])
    rt.close()

    moved = same_memory(settings, embedding={"model": TINY, "width": 32})
    with pytest.raises(StartupError):  # config 32, meta 64: stop, say both
        open_runtime(moved)
    rt = open_runtime(moved, check_width=False)
    with write_transaction(rt.engine) as conn:
        embedding_service.rebuild_vectors(conn, 32)
    rt.model = load_model(rt.settings)
    rt.verify_width()
    assert rt.embedder is not None
    done = embedding_service.reindex(rt.engine, rt.embedder)
    with read_transaction(rt.engine) as conn:
        assert stored_width(conn) == 32
        assert embedding_service.pending_count(conn) == 0
        assert done == conn.exec_driver_sql("SELECT count(*) FROM facts_vec").scalar()
    rt.close()
    open_runtime(moved, load_model=True).close()  # starts cleanly at the new width


class FailingAfter:
    """An embedder that breaks after `good` batches, like a process killed mid-run."""

    def __init__(self, good: int) -> None:
        self.inner, self.good, self.width, self.name = (
            FakeEmbedder(TEST_WIDTH),
            good,
            TEST_WIDTH,
            "x",
        )

    def embed_documents(self, texts):
        if self.good == 0:
            raise RuntimeError("interrupted")
        self.good -= 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_reindex_survives_interruption(rt) -> None:
    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        fact_service.store_facts(conn, ctx, [NewFact("/q", f"queued {i}") for i in range(25)])
    with read_transaction(rt.engine) as conn:
        before = embedding_service.pending_count(conn)
    with pytest.raises(RuntimeError):
        embedding_service.reindex(rt.engine, FailingAfter(good=2), batch_size=5)
    with read_transaction(rt.engine) as conn:
        assert embedding_service.pending_count(conn) == before - 10  # two batches kept
    embedding_service.reindex(rt.engine, FakeEmbedder(TEST_WIDTH), batch_size=5)
    with read_transaction(rt.engine) as conn:
        assert embedding_service.pending_count(conn) == 0
