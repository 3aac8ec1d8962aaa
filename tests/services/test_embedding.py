"""The embedding queue (facts_pending_embedding_idx): what waits for the model, and what not."""

from __future__ import annotations

import pytest

from app.runtime import Runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services.facts import NewFact

QUEUE = (
    "SELECT id FROM facts INDEXED BY facts_pending_embedding_idx "
    "WHERE embedding IS NULL AND deleted_at IS NULL ORDER BY id"
)


@pytest.mark.only_backend("sqlite")  # SQLite's query plans (INDEXED BY, EXPLAIN)
def test_a_deleted_fact_leaves_the_embedding_queue(rt: Runtime, actor) -> None:
    me = actor()
    with me.tx() as (conn, ctx):
        kept = fact_service.store_fact(conn, ctx, NewFact("/q", "waits for a model"))
        gone = fact_service.store_fact(conn, ctx, NewFact("/q", "deleted before it is embedded"))
        fact_service.delete_fact(conn, ctx, gone.id)
    with me.tx() as (conn, _ctx):
        # INDEXED BY fails the statement unless the partial index can answer it whole.
        queued = conn.exec_driver_sql(QUEUE).scalars().all()
        assert queued == [*range(1, 8), kept.id]  # the 7 /memory facts, then ours
        assert embedding_service.pending_count(conn) == 8


@pytest.mark.only_backend("sqlite")  # SQLite's query plans (INDEXED BY, EXPLAIN)
def test_every_query_of_the_queue_is_answered_by_its_index(rt: Runtime, actor) -> None:
    with actor().tx() as (conn, _ctx):
        plan = " ".join(
            str(row[-1])
            for row in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT id, content FROM facts "
                "WHERE embedding IS NULL AND deleted_at IS NULL AND id > 0 ORDER BY id LIMIT 64"
            )
        )
    assert "facts_pending_embedding_idx" in plan
