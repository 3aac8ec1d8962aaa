"""FakeEmbedder: deterministic, normalized, and near for texts that share words."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from app.embeddings.base import Embedder
from app.embeddings.fake import FakeEmbedder


def test_is_an_embedder_with_its_width_and_name() -> None:
    fake = FakeEmbedder(32)
    assert isinstance(fake, Embedder)
    assert (fake.width, fake.name) == (32, "fake")
    assert FakeEmbedder(8, name="other").name == "other"


def test_rows_are_unit_float32_of_the_right_shape() -> None:
    fake = FakeEmbedder(64)
    vectors = fake.embed_documents(["hello world", "", "!!!", "a b c d e f g h i j k"])
    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    query = fake.embed_query("hello")
    assert query.shape == (64,)
    assert query.dtype == np.float32
    assert fake.embed_documents([]).shape == (0, 64)


def test_same_text_same_vector_and_query_equals_document() -> None:
    a, b = FakeEmbedder(128), FakeEmbedder(128)
    text = "The quick brown fox"
    np.testing.assert_array_equal(a.embed_query(text), b.embed_documents([text])[0])
    # Case does not matter: words are lowercased.
    np.testing.assert_array_equal(a.embed_query(text), a.embed_query(text.upper()))


@pytest.mark.slow  # starts a process
def test_same_in_another_process() -> None:
    # str hashes are salted per process; the fake must not depend on them.
    code = (
        "from app.embeddings.fake import FakeEmbedder;"
        "print(FakeEmbedder(16).embed_query('stable across runs').tolist())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = FakeEmbedder(16).embed_query("stable across runs").tolist()
    assert out.stdout.strip() == str(here)


def test_shared_words_are_near_and_unrelated_texts_far() -> None:
    fake = FakeEmbedder(256)
    base, related, unrelated = fake.embed_documents(
        [
            "the cat sat on the mat",
            "a cat sat on a rug",
            "quarterly revenue grew five percent",
        ]
    )
    # Three of five distinct words shared, against none.
    assert float(base @ related) > 0.3
    assert abs(float(base @ unrelated)) < 0.2
