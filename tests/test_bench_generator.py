"""The search bench's generator: every size at the density of the 100k memory, and a kept
memory never resumed or reused from other sentences than it was made of."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import search_bench


def test_the_sentences_grow_with_the_largest_size() -> None:
    assert search_bench.default_unique(10_000) == 4000
    assert search_bench.default_unique(100_000) == 4000  # 25 facts a sentence
    assert search_bench.default_unique(1_000_000) == 40_000


def test_a_short_corpus_gives_its_round_thousands_and_the_queries_after_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus = [f"sentence {n}" for n in range(2_450)]
    monkeypatch.setattr(search_bench, "sentences", lambda limit: corpus[:limit])
    material, queries = search_bench.material_and_queries(40_000, 100)
    assert (len(material), queries[0], len(queries)) == (2_000, "sentence 2000", 100)
    material, queries = search_bench.material_and_queries(1_000, 100)
    assert (material[-1], queries) == ("sentence 999", corpus[1_000:1_100])


def test_a_kept_memory_is_not_grown_from_other_sentences(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, search_bench.WIDTH)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    unique = [f"a sentence about the number {n}" for n in range(6)]
    search_bench.build(tmp_path, 8, unique, vectors)
    assert search_bench.build(tmp_path, 10, unique, vectors)["built"] == 2
    with pytest.raises(SystemExit, match=r"made from 6 sentences .* from 5: pass --unique 6"):
        search_bench.build(tmp_path, 12, unique[:5], vectors[:5])
