"""The model's work on the memory: embeddings for stores, and filling the pending queue.

Loading the model is app.embeddings.loader.load_model; the Runtime keeps its result.
embed_for_store runs before the use case opens its write transaction. The reindex
loop is the one service that opens transactions itself (see app.services): each
batch is read in a snapshot, embedded with none open, and written in its own short
write transaction, so an interrupted run keeps what it did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
from sqlalchemy import Connection, Engine, func, select, update

from app.db.dialects import backend
from app.db.engine import read_transaction, write_transaction
from app.db.tables import facts, meta
from app.embeddings.base import Embedder
from app.services import vector_index

log = logging.getLogger(__name__)


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def embed_for_store(embedder: Embedder | None, texts: Sequence[str]) -> list[bytes | None]:
    """Embeddings for facts about to be stored, or None each: a failing model never
    stops a store, the fact waits in facts_pending_embedding_idx instead."""
    if embedder is None or not texts:
        return [None] * len(texts)
    try:
        vectors = embedder.embed_documents(list(texts))
    except Exception:  # the model failed: store anyway, reindex later
        log.exception("embedding failed; the facts are queued for reindex")
        return [None] * len(texts)
    return [to_blob(v) for v in vectors]


ProgressCallback = Callable[[int, int], None]


def pending_count(conn: Connection) -> int:
    return conn.execute(
        select(func.count())
        .select_from(facts)
        .where(facts.c.embedding.is_(None), facts.c.deleted_at.is_(None))
    ).scalar_one()


def any_embedded(conn: Connection) -> bool:
    """Whether some fact (deleted and superseded ones included) holds a vector: the
    memory's vectors then live in its model's space, which only a deliberate switch
    (rebuild_vectors) leaves."""
    held = select(facts.c.id).where(facts.c.embedding.is_not(None)).limit(1)
    return conn.execute(held).first() is not None


def rebuild_vectors(conn: Connection, width: int) -> None:
    """Move the memory to a model of another width, on purpose: forget every code and
    the cells, record `width` in meta, and queue every fact for embedding again."""
    backend(conn).vectors.recreate(conn, width)  # PostgreSQL's HNSW table; SQLite: nothing
    conn.execute(update(facts).where(facts.c.embedding.is_not(None)).values(embedding=None))
    conn.execute(update(meta).where(meta.c.key == "embedding_width").values(value=str(width)))
    vector_index.clear_codes(conn)


def fill_vector(conn: Connection, fact_id: int, vector: bytes) -> bool:
    """Give a waiting fact its embedding; False (and nothing written) when someone
    else filled it meanwhile, or it is no longer waiting."""
    from app.services.facts import write_vector

    # The caller holds the write lock (BEGIN IMMEDIATE): nobody fills it between
    # this check and the write.
    waiting = conn.execute(
        select(facts.c.id).where(facts.c.id == fact_id, facts.c.embedding.is_(None))
    ).scalar()
    if waiting is not None:
        write_vector(conn, fact_id, vector)
    return waiting is not None


def embed_pending_batch(
    engine: Engine, embedder: Embedder, *, after: int, size: int
) -> tuple[int, int] | None:
    """Embed the next `size` waiting facts with ids above `after`: (how many got
    their vector, the last id looked at), or None when nothing waits there.

    The model runs with no transaction open; the vectors are then written in one
    short write transaction, so the write lock is held for milliseconds whatever
    the model's speed.
    """
    with read_transaction(engine) as conn:
        rows = conn.execute(
            select(facts.c.id, facts.c.content)
            .where(facts.c.embedding.is_(None), facts.c.deleted_at.is_(None), facts.c.id > after)
            .order_by(facts.c.id)
            .limit(size)
        ).all()
    if not rows:
        return None
    vectors = embedder.embed_documents([row.content for row in rows])
    with write_transaction(engine) as conn:
        filled = sum(
            fill_vector(conn, row.id, to_blob(vector))
            for row, vector in zip(rows, vectors, strict=True)
        )
    return filled, int(rows[-1].id)


def reindex(
    engine: Engine,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    on_batch: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> int:
    """Embed the pending queue in batches, each committed on its own, so an
    interrupted run keeps what it did and the next run goes on from there.

    Returns how many facts it embedded. The CLI's `memory reindex` and the
    server's background worker (app.services.embed_worker) both run this.
    """
    with read_transaction(engine) as conn:
        total = pending_count(conn)
    done, after = 0, 0
    while should_stop is None or not should_stop():
        batch = embed_pending_batch(engine, embedder, after=after, size=batch_size)
        if batch is None:
            break
        filled, after = batch
        done += filled
        if on_batch is not None:
            on_batch(done, total)
    # The memory may have outgrown its index cells (a first reindex of a large import).
    with read_transaction(engine) as conn:
        stale = vector_index.partitions_stale(conn)
    if stale:
        with write_transaction(engine) as conn:
            vector_index.repartition_if_stale(conn)
    return done
