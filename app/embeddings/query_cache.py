"""Query embeddings kept for the next time the same words are searched.

Embedding a query is the largest part of a semantic search (a few ms with
minilm-l6 when the machine is idle, 20+ ms under load), and agents repeat
their queries. The cache is bounded (least recently used goes first) and keyed
by the model's name and width with the exact text, so two models never share a
vector. Vectors are handed out read-only: one caller cannot spoil another's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from app.embeddings.base import Embedder, Vectors

DEFAULT_SIZE = 1024  # 1024 x 768-d float32 = 3 MB at most


class QueryCache:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if size < 0:
            raise ValueError("size must be 0 (no cache) or more")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._vectors: OrderedDict[tuple[str, int, str], Vectors] = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    def embed_query(self, embedder: Embedder, text: str) -> Vectors:
        """The query's vector: from the cache, else from the model (then kept)."""
        key = (embedder.name, embedder.width, text)
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
                self.hits += 1
                return vector
            self.misses += 1
        # The model runs outside the lock: concurrent searches embed in parallel (two
        # threads embedding the same new text both do the work once; no harm).
        vector = np.asarray(embedder.embed_query(text), dtype=np.float32).copy()
        vector.setflags(write=False)
        if self.size:
            with self._lock:
                self._vectors[key] = vector
                self._vectors.move_to_end(key)
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        return vector
