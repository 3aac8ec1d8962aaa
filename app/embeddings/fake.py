"""A deterministic stand-in embedder for tests where meaning is not the point.

Hashed bag of words (each lowercased word adds +-1 to one dimension) plus a
small hashed character-trigram part, L2-normalized: texts that share words
land near each other, unrelated texts near orthogonal. No files, no model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from app.embeddings.base import Vectors

_WORD = re.compile(r"\w+")
# Small enough that word overlap dominates, large enough that "cat" and "cats" relate.
TRIGRAM_WEIGHT = 0.15


@lru_cache(maxsize=65536)
def _slot(feature: str, width: int) -> tuple[int, float]:
    # hashlib, not hash(): str hashes are salted per process.
    value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return value % width, (1.0 if (value >> 63) & 1 else -1.0)


class FakeEmbedder:
    """Same text, same vector, in every process."""

    def __init__(self, width: int, name: str = "fake") -> None:
        if width < 1:
            raise ValueError("width must be at least 1")
        self.width = width
        self.name = name

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.width), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._one(text)
        return out

    def embed_query(self, text: str) -> Vectors:
        return self._one(text)

    def _one(self, text: str) -> Vectors:
        vec = np.zeros(self.width, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            index, sign = _slot("w:" + word, self.width)
            vec[index] += sign
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                index, sign = _slot("t:" + padded[i : i + 3], self.width)
                vec[index] += sign * TRIGRAM_WEIGHT
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            # No words (or cancelling ones): still a unit vector, as every row must be.
            index, _ = _slot("empty", self.width)
            vec[index] = 1.0
            norm = 1.0
        return (vec / norm).astype(np.float32)
