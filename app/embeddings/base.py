"""What every embedder offers, and the error that says why there is none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalized float32 vectors of a fixed width."""

    name: str
    width: int

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed texts to store: shape (len(texts), width), batched internally."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Embed one search query: shape (width,)."""
        ...


class ModelUnavailable(Exception):
    """No embedder can be had; `reason` is a sentence for a person (readiness, CLI).

    The reason names files and URLs but never a server path, since readiness
    may show it over HTTP.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def l2_normalize(vectors: Vectors) -> Vectors:
    """Scale each row to unit length; an all-zero row stays zero rather than NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
