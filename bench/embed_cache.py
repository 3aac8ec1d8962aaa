"""Embeddings kept on disk between bench runs, by the model's name and the exact text.

The quality bench stores thousands of conversation turns in fresh memories on every
run; with the model on two cores that is minutes of the same arithmetic each time. The
model is deterministic, so a vector computed once is the vector: this wrapper hands out
the kept one and embeds only texts it has not seen (bench/out/, never committed).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from app.embeddings.base import Embedder, Vectors

OUT = Path(__file__).parent / "out"
BATCH = 64


class CachedEmbedder:
    """An Embedder that remembers: same name and width as the model it wraps."""

    def __init__(self, model: Embedder, path: Path | None = None) -> None:
        self.model = model
        self.name = model.name
        self.width = model.width
        target = path or OUT / f"embed-cache-{model.name}-{model.width}.sqlite"
        target.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(target, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (k BLOB PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()

    @staticmethod
    def _key(kind: str, text: str) -> bytes:
        return hashlib.sha256(f"{kind}\x00{text}".encode()).digest()

    def _kept(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT k, vec FROM v WHERE k IN ({marks})", chunk)
                found.update(dict(rows.fetchall()))
        return found

    def _keep(self, pairs: list[tuple[bytes, bytes]]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", pairs)
            self._db.commit()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        keys = [self._key("d", t) for t in texts]
        kept = self._kept(keys)
        missing = [i for i, k in enumerate(keys) if k not in kept]
        for start in range(0, len(missing), BATCH):
            chunk = missing[start : start + BATCH]
            vectors = self.model.embed_documents([texts[i] for i in chunk])
            pairs = [
                (keys[i], np.asarray(v, "<f4").tobytes())
                for i, v in zip(chunk, vectors, strict=True)
            ]
            self._keep(pairs)
            kept.update(pairs)
        if not texts:
            return np.empty((0, self.width), np.float32)
        return np.stack([np.frombuffer(kept[k], "<f4") for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> Vectors:
        key = self._key("q", text)
        kept = self._kept([key])
        if key not in kept:
            vector = np.asarray(self.model.embed_query(text), "<f4")
            self._keep([(key, vector.tobytes())])
            return vector.astype(np.float32)
        return np.frombuffer(kept[key], "<f4").astype(np.float32)
