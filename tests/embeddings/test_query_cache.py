"""The query-embedding cache: same vectors as the model, bounded, and a hit skips the model."""

from __future__ import annotations

import numpy as np
import pytest

from app.embeddings.fake import FakeEmbedder
from app.embeddings.query_cache import QueryCache
from app.services import search as search_service
from tests.conftest import CountingEmbedder


def test_a_cached_vector_is_the_fresh_embedding() -> None:
    model, cache = CountingEmbedder(32), QueryCache(8)
    first = cache.embed_query(model, "where is the spare key")
    again = cache.embed_query(model, "where is the spare key")
    fresh = FakeEmbedder(32).embed_query("where is the spare key")
    assert np.array_equal(first, fresh) and np.array_equal(again, fresh)
    assert model.queries == ["where is the spare key"]  # the hit did not call the model
    assert (cache.hits, cache.misses) == (1, 1)
    with pytest.raises(ValueError):
        again[0] = 1.0  # read-only: no caller can spoil another's vector


def test_the_cache_stays_within_its_size_and_drops_the_least_recent() -> None:
    model, cache = CountingEmbedder(16), QueryCache(3)
    for i in range(10):
        cache.embed_query(model, f"query {i}")
        assert len(cache) <= 3
    cache.embed_query(model, "query 7")  # recently used: still there
    cache.embed_query(model, "query 0")  # long gone: the model runs again
    assert model.queries[-1:] == ["query 0"] and model.queries.count("query 7") == 1


def test_models_never_share_a_vector() -> None:
    cache = QueryCache(8)
    a, b = CountingEmbedder(16, "one"), CountingEmbedder(16, "two")
    cache.embed_query(a, "same words")
    cache.embed_query(b, "same words")
    assert a.queries == b.queries == ["same words"]


def test_a_hybrid_search_embeds_its_query_once() -> None:
    model, cache = CountingEmbedder(16), QueryCache()
    for _ in range(3):
        query = search_service.prepare(q="red kite", embedder=model, mode="hybrid", cache=cache)
        assert query.vector is not None
    assert model.queries == ["red kite"]
