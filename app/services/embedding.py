"""The model at run time: load it once, embed for stores, and fill the pending queue."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from app.db.engine import read_transaction
from app.db.migrate import check_width
from app.embeddings.base import Embedder, ModelUnavailable
from app.embeddings.loader import load_embedder

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger(__name__)


def attach_model(rt: Runtime, *, download: bool | None = None, progress: bool = False) -> None:
    """Load the configured model once; with none, say why (readiness shows it).

    A model whose width disagrees with config and meta stops start-up: the memory
    stops instead of giving wrong answers (seed: "Search").
    """
    settings = rt.settings
    if settings.embedding.model == "none":
        rt.model_problem = "no embedding model is configured (embedding.model: none)"
        return
    if download is not None:
        settings = settings.model_copy(
            update={"embedding": settings.embedding.model_copy(update={"download": download})}
        )
    started = time.perf_counter()
    try:
        embedder = load_embedder(settings, progress=progress)
    except ModelUnavailable as exc:
        rt.model_problem = exc.reason
        log.warning("no embedding model: %s", exc.reason)
        return
    if embedder is None:
        rt.model_problem = "no embedding model is configured"
        return
    with read_transaction(rt.engine) as conn:
        check_width(conn, rt.settings.embedding.width, embedder.width)
    rt.embedder = embedder
    rt.model_problem = None
    rt.model_load_seconds = time.perf_counter() - started


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
