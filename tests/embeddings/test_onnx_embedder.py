"""OnnxEmbedder on a tiny generated model: the real tokenizer, session and pooling."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.embeddings.base import Embedder
from app.embeddings.catalog import Pooling
from app.embeddings.onnx_embedder import OnnxEmbedder
from tests.onnx_factory import make_tiny_model, make_tiny_model_dir, tiny_spec

TEXTS = [
    "short",
    "a somewhat longer text with several more words in it than the others",
    "",
    "Unicode: café naïve 東京",
    "the cat sat on the mat",
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model_dir(tmp_path_factory.mktemp("tiny"), 48)


def test_width_and_normalized_float32_rows(tiny_dir: Path) -> None:
    embedder = OnnxEmbedder(tiny_spec("tiny", 48), tiny_dir, threads=1, batch_size=2)
    assert isinstance(embedder, Embedder)
    assert embedder.width == 48
    vectors = embedder.embed_documents(TEXTS)
    assert vectors.shape == (len(TEXTS), 48)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    query = embedder.embed_query("short")
    assert query.shape == (48,)
    assert query.dtype == np.float32
    assert embedder.embed_documents([]).shape == (0, 48)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_batch_equals_one_at_a_time_in_order(tiny_dir: Path, pooling: Pooling) -> None:
    spec = replace(tiny_spec("tiny", 48), pooling=pooling)
    batched = OnnxEmbedder(spec, tiny_dir, batch_size=3).embed_documents(TEXTS)
    single = OnnxEmbedder(spec, tiny_dir, batch_size=1)
    one_by_one = np.stack([single.embed_documents([t])[0] for t in TEXTS])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-6)


def test_prefixes_apply_to_queries_and_documents(tiny_dir: Path) -> None:
    embedder = OnnxEmbedder(tiny_spec("tiny", 48), tiny_dir)  # "query: " / "passage: "
    text = "the cat sat on the mat"
    assert not np.allclose(embedder.embed_query(text), embedder.embed_documents([text])[0])
    plain = OnnxEmbedder(
        replace(tiny_spec("tiny", 48), query_prefix="", document_prefix=""), tiny_dir
    )
    np.testing.assert_allclose(plain.embed_query(text), plain.embed_documents([text])[0], atol=1e-6)


def test_truncates_at_max_tokens_instead_of_failing(tiny_dir: Path) -> None:
    spec = replace(tiny_spec("tiny", 48), max_tokens=8)
    embedder = OnnxEmbedder(spec, tiny_dir)
    long_a = "alpha beta gamma delta epsilon zeta eta theta " + "iota " * 500
    long_b = "alpha beta gamma delta epsilon zeta eta theta " + "kappa " * 500
    # Both keep only their first 8 tokens, so they embed the same.
    a, b = embedder.embed_documents([long_a, long_b])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_width_comes_from_the_model_not_the_spec(tmp_path: Path) -> None:
    model_dir = make_tiny_model_dir(tmp_path, 24)
    embedder = OnnxEmbedder(tiny_spec("tiny", 999), model_dir)
    assert embedder.width == 24


def test_feeds_only_declared_inputs(tmp_path: Path) -> None:
    # A model that declares only input_ids and attention_mask still runs.
    import onnx

    model_dir = make_tiny_model_dir(tmp_path, 16)
    model = onnx.load(str(make_tiny_model(model_dir / "model.onnx", 16)))
    kept = [i for i in model.graph.input if i.name != "token_type_ids"]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.save(model, str(model_dir / "model.onnx"))
    embedder = OnnxEmbedder(tiny_spec("tiny", 16), model_dir)
    assert embedder.embed_documents(["hi there"]).shape == (1, 16)
