"""Background embedding: a server with a model fills the pending queue itself."""

from __future__ import annotations

import logging
import threading

import numpy as np
from sqlalchemy import select

from app.db.dialects import backend
from app.db.engine import write_transaction
from app.db.tables import facts
from app.embeddings.fake import FakeEmbedder
from app.errors import Unavailable
from app.runtime import Runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services.embed_worker import EmbedWorker
from app.services.facts import NewFact
from tests.conftest import TEST_WIDTH

WAIT = 30.0  # seconds: a bound for a slow machine, never a sleep


def pending(rt: Runtime) -> int:
    with rt.engine.connect() as conn:
        return embedding_service.pending_count(conn)


class FilledMeanwhile(FakeEmbedder):
    """Another writer embeds one fact while the worker's model runs."""

    def __init__(self, rt: Runtime, victim: int, text: str) -> None:
        super().__init__(TEST_WIDTH)
        self.rt, self.victim, self.text = rt, victim, text

    def embed_documents(self, texts):
        if self.text in texts:
            with write_transaction(self.rt.engine) as conn:
                fact_service.write_vector(conn, self.victim, np.ones(TEST_WIDTH, "<f4").tobytes())
        return super().embed_documents(texts)


def test_a_pass_embeds_what_waits_and_skips_what_someone_else_filled(rt: Runtime, actor) -> None:
    with actor().tx() as (conn, ctx):
        stored = fact_service.store_facts(
            conn, ctx, [NewFact("/later", f"waiting fact {i}") for i in range(20)]
        )
    victim = stored[3]
    model = FilledMeanwhile(rt, victim.id, victim.content)
    worker = EmbedWorker(rt.engine, lambda: model, batch_size=4)
    assert worker.run_pass() == 26  # 20 new facts and the 7 starter facts, but the victim
    assert pending(rt) == 0
    with rt.engine.connect() as conn:
        stored = backend(conn).vectors.stored()
        blob = conn.execute(select(stored).where(facts.c.id == victim.id)).scalar_one()
    assert np.array_equal(np.frombuffer(blob, "<f4"), np.ones(TEST_WIDTH, "<f4"))
    assert worker.run_pass() == 0  # nothing left: a pass is cheap


def test_the_thread_picks_up_facts_queued_later_when_woken(rt: Runtime, actor) -> None:
    embedder = FakeEmbedder(TEST_WIDTH)
    worker = EmbedWorker(rt.engine, lambda: embedder, poll_seconds=3600)
    worker.start()
    try:
        assert worker.wait_idle(WAIT)
        with actor().tx() as (conn, ctx):
            fact_service.store_facts(conn, ctx, [NewFact("/import", "queued by an import")])
        assert pending(rt) == 1
        worker.wake()
        assert worker.wait_idle(WAIT)
        assert pending(rt) == 0
    finally:
        worker.stop()
    assert not worker._thread.is_alive()


def test_a_database_fault_pauses_the_worker_with_one_line_and_it_resumes(
    rt: Runtime, actor, caplog
) -> None:
    """A database that is away is a warning line a poll, not a traceback a poll; the
    next pass after it embeds as usual."""
    embedder = FakeEmbedder(TEST_WIDTH)
    worker = EmbedWorker(rt.engine, lambda: embedder, poll_seconds=3600)
    passes = threading.Event()
    real_pass = worker.run_pass

    def failing_once() -> int:
        if not passes.is_set():
            passes.set()
            raise Unavailable("The database is unavailable right now.", retry_after=5)
        return real_pass()

    worker.run_pass = failing_once  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="app.services.embed_worker"):
        worker.start()
        try:
            assert passes.wait(WAIT)
            worker.wake()
            assert worker.wait_idle(WAIT)
        finally:
            worker.stop()
    (record,) = [r for r in caplog.records if r.name == "app.services.embed_worker"]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "unavailable" in record.getMessage()
    assert pending(rt) == 0
