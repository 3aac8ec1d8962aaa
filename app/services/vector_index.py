"""An in-memory binary index over the embeddings, for coarse nearest-neighbour search.

Exact float32 search over 100k x 768 vectors reads 300 MB per query (vec0 took
~120 ms, numpy ~30 ms here). Instead, each vector keeps one bit per dimension
(its sign): 100k x 768 are 9.6 MB, and ranking all of them by Hamming distance
takes ~2 ms. Candidates, nearest first, are scored with an int8 copy of each
vector (77 MB per 100k x 768; cosine within ~1e-3), and the search service scores
the best few exactly from facts.embedding. Measured in bench/search_bench.py.

The index follows the database through vector_log (a trigger appends every
embedding written, by any process) and meta.vector_generation (bumped when every
vector is rebuilt), so a fact stored by the CLI is found by a running server.
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, select

from app.db.tables import facts, meta, vector_log

REFRESH_BATCH = 5_000


def binary_codes(vectors: NDArray[np.float32]) -> NDArray[np.uint8]:
    return np.packbits(np.asarray(vectors) > 0, axis=-1)


class VectorIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._codes: NDArray[np.uint8] = np.empty((0, 0), dtype=np.uint8)
        self._approx: NDArray[np.int8] = np.empty((0, 0), dtype=np.int8)
        self._size = 0
        self._slot: dict[int, int] = {}
        self._last_seq = 0
        self._generation: str | None = None

    def __len__(self) -> int:
        return self._size

    def refresh(self, conn: Connection) -> None:
        """Catch up with embeddings written since the last refresh (cheap when none)."""
        generation = conn.execute(
            select(meta.c.value).where(meta.c.key == "vector_generation")
        ).scalar()
        last = conn.execute(select(vector_log.c.seq).order_by(vector_log.c.seq.desc())).scalar()
        if generation == self._generation and (last or 0) == self._last_seq:
            return
        with self._lock:
            if generation != self._generation:
                self._reset()
                self._generation = generation
            while True:
                rows = conn.execute(
                    select(vector_log.c.seq, facts.c.id, facts.c.embedding)
                    .join(facts, facts.c.id == vector_log.c.fact_id)
                    .where(vector_log.c.seq > self._last_seq, facts.c.embedding.is_not(None))
                    .order_by(vector_log.c.seq)
                    .limit(REFRESH_BATCH)
                ).all()
                if not rows:
                    # Log rows whose fact lost its embedding since: skip past them.
                    self._last_seq = max(self._last_seq, last or 0)
                    return
                self._add([r.id for r in rows], [r.embedding for r in rows])
                self._last_seq = rows[-1].seq

    def _reset(self) -> None:
        self._reset_width(0, 0)
        self._last_seq = 0

    def _add(self, ids: list[int], blobs: list[bytes]) -> None:
        vectors = np.stack([np.frombuffer(b, dtype="<f4") for b in blobs])
        codes = binary_codes(vectors)
        approx = int8_approximation(vectors)
        if self._approx.shape[1] != approx.shape[1]:
            self._reset_width(codes.shape[1], approx.shape[1])
        for position, (fact_id, code) in enumerate(zip(ids, codes, strict=True)):
            slot = self._slot.get(fact_id)
            if slot is None:
                if self._size == len(self._ids):
                    self._grow()
                slot = self._size
                self._size += 1
                self._slot[fact_id] = slot
                self._ids[slot] = fact_id
            self._codes[slot] = code
            self._approx[slot] = approx[position]

    def _reset_width(self, nbytes: int, width: int) -> None:
        self._ids = np.empty(0, dtype=np.int64)
        self._codes = np.empty((0, nbytes), dtype=np.uint8)
        self._approx = np.empty((0, width), dtype=np.int8)
        self._size, self._slot = 0, {}

    def _grow(self) -> None:
        capacity = max(1024, 2 * len(self._ids))
        ids = np.zeros(capacity, dtype=np.int64)
        codes = np.zeros((capacity, self._codes.shape[1]), dtype=np.uint8)
        approx = np.zeros((capacity, self._approx.shape[1]), dtype=np.int8)
        ids[: self._size] = self._ids[: self._size]
        codes[: self._size] = self._codes[: self._size]
        approx[: self._size] = self._approx[: self._size]
        self._ids, self._codes, self._approx = ids, codes, approx

    def candidates(self, query: NDArray[np.float32]) -> Candidates:
        """Every indexed fact, to be taken nearest first (Hamming order), with an
        approximate cosine distance for each (int8 vectors held in memory)."""
        with self._lock:
            size = self._size
            ids, codes, approx = self._ids[:size], self._codes[:size], self._approx[:size]
        query_code = binary_codes(query.reshape(1, -1))[0]
        if size == 0 or codes.shape[1] != query_code.shape[0]:
            return Candidates(np.empty(0, np.int64), np.empty(0, np.uint16), approx, query)
        xor = codes ^ query_code
        if xor.shape[1] % 8 == 0:
            xor = xor.view(np.uint64)  # 8x fewer popcounts
        distances = np.bitwise_count(xor).sum(axis=1, dtype=np.uint16)
        return Candidates(ids, distances, approx, query)


class Candidates:
    """Coarse candidates of one query, handed out in Hamming order, chunk by chunk."""

    def __init__(
        self,
        ids: NDArray[np.int64],
        hamming: NDArray[np.uint16],
        approx: NDArray[np.int8],
        query: NDArray[np.float32],
    ) -> None:
        self.ids, self.hamming, self.approx, self.query = ids, hamming, approx, query
        self._order: NDArray[np.intp] | None = None
        self.total = len(ids)

    def _positions(self, start: int, stop: int) -> NDArray[np.intp]:
        stop = min(stop, self.total)
        if self._order is None and stop < self.total // 2:
            # The first chunks need only a partial sort: ~0.5 ms instead of a full one.
            head = np.argpartition(self.hamming, stop - 1)[:stop]
            head = head[np.lexsort((head, self.hamming[head]))]
            return head[start:stop]
        if self._order is None:
            # A stable sort of 16-bit keys is a radix sort; ties: older first.
            self._order = np.argsort(self.hamming, kind="stable")
        return self._order[start:stop]

    def chunk(self, start: int, stop: int) -> tuple[list[int], NDArray[np.float32]]:
        """Fact ids ranked [start, stop) by Hamming distance, and their approximate
        cosine distances (from the int8 vectors)."""
        positions = self._positions(start, stop)
        approx = self.approx[positions].astype(np.float32) @ self.query / 127.0
        return self.ids[positions].tolist(), 1.0 - approx


def int8_approximation(vectors: NDArray[np.float32]) -> NDArray[np.int8]:
    """Unit vectors' components lie in [-1, 1]: 127 steps keep cosine to ~1e-3."""
    return np.clip(np.rint(np.asarray(vectors) * 127.0), -127, 127).astype(np.int8)
