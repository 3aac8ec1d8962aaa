"""The vector index: quantized codes on disk in partitions, loaded whole at start.

Each embedded fact has one row in facts_vec: its partition (`list`) and its code,
one sign bit per dimension then an int8 approximation (48 + 384 bytes at 384-d).
The full float32 vector stays in facts.embedding, the one full copy; the code is
what search reads.

facts_vec is clustered on (list, fact_id): a full scan reads the codes partition by
partition, so a start loads the index in one sequential read into arrays of
exactly the right size, with no sort and no second copy. The partitions are the
cells of a spherical k-means over the embeddings (IVF): a query ranks the
centroids, takes the codes of the nearest cells (POOL_SHARE of the index), keeps
the best eighth of them (up to RANKED_HEAD) by Hamming distance, ranks those by
their int8 approximations, and the search service checks the filters in that order and
scores the best few exactly from facts.embedding. Below PARTITION_FROM vectors
there is one cell and the pass is a flat scan.

Why: a flat Hamming scan costs ~56 ns a vector here (~56 ms a query at a
million, 100 ms on a busy machine); the pass over the nearest 10% of the cells
ranked in ~20 ms there with recall@10 0.969 (bench/search_bench.py prints the trade).

The index follows the database through vector_log (a trigger appends every
embedding written, by any process; the index reads the new code rows) and
meta.vector_generation (bumped when every vector is rebuilt or re-partitioned),
so a fact stored by the CLI is found by a running server.
"""

from __future__ import annotations

import itertools
import json
import math
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import (
    Connection,
    Integer,
    String,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
    update,
)

from app.db.dialects import backend
from app.db.tables import facts, facts_vec, facts_vec_centroids, meta, vector_log

REFRESH_BATCH = 5_000
LOAD_BATCH = 65_536
# Below this many vectors one cell is enough: a flat scan of 20k codes takes ~1 ms.
PARTITION_FROM = 20_000
# Cells are re-trained when the memory has grown this many times since: a cell then
# holds 4x the codes it was sized for, and a query examines 4x as many (still ~2 ms).
STALE_GROWTH = 4
KMEANS_ITERATIONS = 8
SAMPLE_PER_CELL = 32
# A query examines the nearest cells until it has this many codes, or POOL_SHARE of
# the index if more (and at least MIN_PROBE cells). The true top 10 were in the
# nearest 30% of cells at 100k (1.0), in the nearest 3% at a million only 0.92 of
# the time, 10%: 0.97, 30%: 0.997. At a million, recall@10 and ranking p50 were
# 0.951 / 16 ms at 5%, 0.969 / 20 ms at 10%, 0.974 / 25 ms at 15% (100 queries,
# 1-in-2 ACL, a 2-core machine at load 5; bench/search_bench.py prints the trade).
POOL = 30_000
POOL_SHARE = 0.10
MIN_PROBE = 8
# Of a pool, the best eighth by Hamming distance (at least MIN_HEAD, at most
# RANKED_HEAD) are ranked by their int8 approximations (cosine within ~1e-3); the
# rest of the pool is left. At a million, 4000 kept recall@10 at 0.955, 8000 at
# 0.960, for ~1 ms more. At 10k, 1000 of 10000 kept recall@10 at 1.000 (a 1-in-2
# ACL, 100 questions) and saved ~1 ms of the 1.6 that ranking 8000 cost.
RANKED_HEAD = 8_000
HEAD_SHARE = 8
MIN_HEAD = 1_000
# Readers' parts kept (VectorIndex.members_known): one per reader's set of tokens.
MEMBERS_KEPT = 256
# An appended segment holds at least this many rows, and at most an eighth of its
# cell: growing never copies what is there, and the slack stays small.
MIN_SEGMENT = 64


def binary_codes(vectors: NDArray[np.float32]) -> NDArray[np.uint8]:
    return np.packbits(np.asarray(vectors) > 0, axis=-1)


def int8_approximation(vectors: NDArray[np.float32]) -> NDArray[np.int8]:
    """Unit vectors' components lie in [-1, 1]: 127 steps keep cosine to ~1e-3."""
    return np.clip(np.rint(np.asarray(vectors) * 127.0), -127, 127).astype(np.int8)


def encode(vectors: NDArray[np.float32]) -> NDArray[np.uint8]:
    """Each vector's code row: its sign bits, then its int8 approximation."""
    return np.hstack([binary_codes(vectors), int8_approximation(vectors).view(np.uint8)])


def bits_width(width: int) -> int:
    return (width + 7) // 8


def unpack_blobs(blobs: Sequence[bytes]) -> NDArray[np.float32]:
    """The float32 vectors stored as `blobs`, one row each; all must be of one width.
    One buffer for them all: a hybrid search's hundred-odd candidates took 0.25 ms as
    one array per blob, stacked."""
    if not blobs:
        raise ValueError("no vectors to unpack")
    size = len(blobs[0])
    if size % 4 or any(len(blob) != size for blob in blobs):
        raise ValueError("stored vectors of different widths cannot be one matrix")
    joined = np.frombuffer(b"".join(blobs), dtype="<f4")
    return joined.reshape(len(blobs), size // 4).astype(np.float32)


# --- the partitions on disk --------------------------------------------------------


@dataclass(frozen=True)
class Partitions:
    token: str  # changes with every training: a key for caches in every process
    cells: int
    trained_on: int  # vectors in the memory when the cells were trained

    def stale(self, vectors: int) -> bool:
        return vectors >= PARTITION_FROM and (
            self.cells <= 1 or vectors >= STALE_GROWTH * max(self.trained_on, 1)
        )


_NO_PARTITIONS = Partitions("", 1, 0)
_centroid_cache: dict[str, NDArray[np.float32]] = {}
_cache_lock = threading.Lock()


def partitions(conn: Connection) -> Partitions:
    value = conn.execute(select(meta.c.value).where(meta.c.key == "vector_partitions")).scalar()
    if not value:
        return _NO_PARTITIONS
    data = json.loads(value)
    return Partitions(str(data["token"]), int(data["cells"]), int(data["trained_on"]))


def centroids(conn: Connection, parts: Partitions | None = None) -> NDArray[np.float32] | None:
    """The cells' unit centroids (cells x width), cached per training in this process:
    a store of one fact then costs one meta read, not a 1.5 MB read of the centroids."""
    parts = parts or partitions(conn)
    if parts.cells <= 1:
        return None
    with _cache_lock:
        cached = _centroid_cache.get(parts.token)
    if cached is not None:
        return cached
    rows = conn.execute(
        select(facts_vec_centroids.c.centroid).order_by(facts_vec_centroids.c.list)
    ).all()
    matrix = unpack_blobs([r.centroid for r in rows])
    with _cache_lock:
        if len(_centroid_cache) > 8:  # tests open many memories in one process
            _centroid_cache.clear()
        _centroid_cache[parts.token] = matrix
    return matrix


def nearest_cells(centers: NDArray[np.float32] | None, vectors: NDArray[np.float32]) -> NDArray:
    if centers is None:
        return np.zeros(len(vectors), dtype=np.int64)
    out = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), 16_384):  # bounds the scores matrix
        out[start : start + 16_384] = np.argmax(vectors[start : start + 16_384] @ centers.T, axis=1)
    return out


def write_codes(conn: Connection, fact_ids: Sequence[int], blobs: Sequence[bytes]) -> None:
    """File each fact's code in the cell nearest its vector, replacing any code it had.
    In the caller's transaction, with the embedding itself: they never disagree.
    Where the database searches vectors itself (PostgreSQL), into its index instead."""
    if not fact_ids:
        return
    in_database = backend(conn).vectors
    if in_database.in_database:
        in_database.write(conn, fact_ids, blobs)
        return
    vectors = unpack_blobs(blobs)
    cells = nearest_cells(centroids(conn), vectors)
    codes = encode(vectors)
    conn.execute(delete(facts_vec).where(facts_vec.c.fact_id.in_(list(fact_ids))))
    conn.execute(
        insert(facts_vec),
        [
            {"list": int(cell), "fact_id": int(fid), "code": code.tobytes()}
            for fid, cell, code in zip(fact_ids, cells, codes, strict=True)
        ],
    )


def code_count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(facts_vec)).scalar_one()


def _bump_generation(conn: Connection) -> None:
    conn.execute(
        update(meta)
        .where(meta.c.key == "vector_generation")
        .values(value=cast(cast(meta.c.value, Integer) + 1, String))
    )


def clear_codes(conn: Connection) -> None:
    """Forget every code and the cells (a rebuild at another width, a fresh import)."""
    conn.execute(delete(facts_vec))
    if backend(conn).vectors.in_database:
        _bump_generation(conn)  # no cells nor codes there: the database's index is all
        return
    conn.execute(delete(facts_vec_centroids))
    conn.execute(delete(vector_log))
    conn.execute(update(meta).where(meta.c.key == "vector_partitions").values(value=""))
    _bump_generation(conn)


def _embedded_ids(conn: Connection) -> NDArray[np.int64]:
    rows = conn.exec_driver_sql("SELECT fact_id FROM facts_vec").all()
    return np.array(sorted(r[0] for r in rows), dtype=np.int64)


def _read_vectors(conn: Connection, ids: NDArray[np.int64]) -> tuple[list[int], NDArray]:
    """The embeddings of `ids` (those that have one), in id order."""
    got_ids: list[int] = []
    blobs: list[bytes] = []
    for start in range(0, len(ids), 4_096):
        chunk = [int(i) for i in ids[start : start + 4_096]]
        rows = conn.execute(
            select(facts.c.id, facts.c.embedding)
            .where(facts.c.id.in_(chunk), facts.c.embedding.is_not(None))
            .order_by(facts.c.id)
        ).all()
        got_ids += [r.id for r in rows]
        blobs += [r.embedding for r in rows]
    return got_ids, unpack_blobs(blobs) if blobs else np.empty((0, 0), np.float32)


def train_cells(sample: NDArray[np.float32], cells: int, seed: int = 0) -> NDArray[np.float32]:
    """Spherical k-means: unit centroids, nearest by dot product."""
    rng = np.random.default_rng(seed)
    centers = sample[rng.choice(len(sample), size=cells, replace=False)].copy()
    for _ in range(KMEANS_ITERATIONS):
        assigned = nearest_cells(centers, sample)
        sums = np.zeros_like(centers)
        np.add.at(sums, assigned, sample)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms == 0
        # An empty cell takes a random sample point: no cell is wasted.
        sums[empty] = sample[rng.choice(len(sample), size=int(empty.sum()))]
        norms[empty] = np.linalg.norm(sums[empty], axis=1)
        centers = (sums / norms[:, None]).astype(np.float32)
    return centers


def cell_count(vectors: int) -> int:
    """~sqrt(n) cells of ~sqrt(n) codes: a query's centroid ranking and its examined
    codes cost about the same (1000 cells of 1000 at a million)."""
    return max(2, min(4_096, round(math.sqrt(vectors))))


def repartition(conn: Connection, *, cells: int | None = None, seed: int = 0) -> int:
    """Train the cells on a sample of the embeddings and re-file every code; bump
    vector_generation so running indexes reload. Returns the number of cells.

    Takes ~1 s per 100k vectors here (reads every embedding once); runs in the
    caller's write transaction.
    """
    ids = _embedded_ids(conn)
    n = len(ids)
    cells = cells or cell_count(n)
    if n < 2 * cells:
        return 1
    rng = np.random.default_rng(seed)
    sample_ids = np.sort(rng.choice(ids, size=min(n, SAMPLE_PER_CELL * cells), replace=False))
    _, sample = _read_vectors(conn, sample_ids)
    centers = train_cells(sample, cells, seed)
    # Re-file every code: read the embeddings in id order, assign, write sorted by cell.
    all_cells = np.empty(n, dtype=np.int64)
    all_codes = np.empty((n, 0), dtype=np.uint8)
    order_ids = np.empty(n, dtype=np.int64)
    filled = 0
    for start in range(0, n, 16_384):
        got, vectors = _read_vectors(conn, ids[start : start + 16_384])
        if not got:
            continue
        k = len(got)
        codes = encode(vectors)
        if all_codes.shape[1] != codes.shape[1]:
            all_codes = np.empty((n, codes.shape[1]), dtype=np.uint8)
        order_ids[filled : filled + k] = got
        all_cells[filled : filled + k] = nearest_cells(centers, vectors)
        all_codes[filled : filled + k] = codes
        filled += k
    order = np.lexsort((order_ids[:filled], all_cells[:filled]))
    conn.execute(delete(facts_vec))
    conn.execute(delete(facts_vec_centroids))
    conn.execute(
        insert(facts_vec_centroids),
        [{"list": i, "centroid": c.astype("<f4").tobytes()} for i, c in enumerate(centers)],
    )
    for start in range(0, filled, 10_000):
        rows = order[start : start + 10_000]
        conn.execute(
            insert(facts_vec),
            [
                {
                    "list": int(all_cells[r]),
                    "fact_id": int(order_ids[r]),
                    "code": all_codes[r].tobytes(),
                }
                for r in rows
            ],
        )
    token = secrets.token_hex(8)
    value = json.dumps({"token": token, "cells": cells, "trained_on": filled})
    conn.execute(update(meta).where(meta.c.key == "vector_partitions").values(value=value))
    # Every code is in its new cell: the log's entries are all in the table now.
    conn.execute(delete(vector_log))
    _bump_generation(conn)
    return cells


def partitions_stale(conn: Connection) -> bool:
    if backend(conn).vectors.in_database:
        return False  # the database's own index (HNSW) needs no cells
    return partitions(conn).stale(code_count(conn))


def repartition_if_stale(conn: Connection) -> bool:
    """Re-train the cells when the memory outgrew them (see STALE_GROWTH)."""
    if partitions_stale(conn):
        repartition(conn)
        return True
    return False


# --- the index in memory -----------------------------------------------------------


class _Cell:
    """One cell's codes: the rows loaded at start (a view of the one big array), then
    segments appended as writes arrive. Appending never copies existing rows."""

    __slots__ = ("segments",)

    def __init__(self) -> None:
        # [ids, sign bits, int8 approximations, rows filled, offset in the loaded
        # arrays (-1 for a segment appended since)]
        self.segments: list[list] = []

    def append(
        self, fact_id: int, bits: NDArray[np.uint8], approx: NDArray[np.int8]
    ) -> list | None:
        """Append one code; the new segment, when one was begun for it."""
        begun = None
        last = self.segments[-1] if self.segments else None
        if last is None or last[3] == len(last[0]):
            size = max(MIN_SEGMENT, self.rows() // 8)
            last = [
                np.empty(size, np.int64),
                np.empty((size, len(bits)), np.uint8),
                np.empty((size, len(approx)), np.int8),
                0,
                -1,
            ]
            self.segments.append(last)
            begun = last
        last[0][last[3]] = fact_id
        last[1][last[3]] = bits
        last[2][last[3]] = approx
        last[3] += 1
        return begun

    def rows(self) -> int:
        return sum(s[3] for s in self.segments)


def hamming(codes: NDArray[np.uint8], query_code: NDArray[np.uint8]) -> NDArray[np.uint16]:
    xor = codes ^ query_code
    if xor.shape[1] % 8 or xor.shape[1] == 0:
        return np.bitwise_count(xor).sum(axis=1, dtype=np.uint16)
    counts = np.bitwise_count(xor.view(np.uint64))  # 8x fewer popcounts
    # The few words added column by column: numpy's sum along rows this short costs
    # twice as much (10k 384-bit codes: 0.22 -> 0.10 ms).
    distances = counts[:, 0].astype(np.uint16)
    for column in range(1, counts.shape[1]):
        distances += counts[:, column]
    return distances


# What refresh() reads before every semantic search: built once (app.db.statements).
_GENERATION_AND_LAST = select(
    select(meta.c.value).where(meta.c.key == "vector_generation").scalar_subquery(),
    select(func.max(vector_log.c.seq)).scalar_subquery(),
)


# The codes logged since a refresh, in the order they were written: built once (a
# statement built per call cost most of a one-code catch-up, 0.4 ms).
_LOGGED_SINCE = (
    select(vector_log.c.seq, facts_vec.c.list, facts_vec.c.fact_id, facts_vec.c.code)
    .join(facts_vec, facts_vec.c.fact_id == vector_log.c.fact_id)
    .where(vector_log.c.seq > bindparam("after"), vector_log.c.seq <= bindparam("last"))
    .order_by(vector_log.c.seq)
    .limit(REFRESH_BATCH)
)


class VectorIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cells: list[_Cell] = []
        self._centroids: NDArray[np.float32] | None = None
        self._size = 0
        self._last_seq = 0
        self._generation: str | None = None
        self._nbytes = 0
        self._loaded = Loaded(
            np.empty(0, np.int64), np.empty((0, 0), np.uint8), np.empty((0, 0), np.int8)
        )
        # The segments begun since the load, in every cell (their rows are in no
        # loaded array): what a walk over a reader's part looks through one by one.
        self._appended: list[list] = []
        self.loads = 0  # whole loads from facts_vec (a test counts them)
        # Readers' parts of the memory (scope tokens -> the facts holding one, ascending,
        # or the bound they were found to pass): kept between searches, a search reading
        # only the facts stored since; emptied on every load (a wipe reloads).
        self._members: dict[tuple[str, ...], NDArray[np.int64] | int] = {}
        # Set once the index has been loaded: readiness waits for it.
        self.ready = threading.Event()

    def __len__(self) -> int:
        return self._size

    def refresh(self, conn: Connection) -> None:
        """Catch up with codes written since the last refresh (cheap when none); the
        first call loads every code from facts_vec. Where the database searches vectors
        itself (PostgreSQL), there is nothing to hold here: ready at once."""
        if backend(conn).vectors.in_database:
            self.ready.set()
            return
        generation, last = conn.execute(_GENERATION_AND_LAST).one()
        last = last or 0
        if generation == self._generation and last == self._last_seq:
            return
        with self._lock:
            if generation != self._generation:
                self._load(conn, last)
                self._generation = generation
                self.ready.set()
            self._catch_up(conn, last)

    def _load(self, conn: Connection, last: int) -> None:
        """Every code, in one sequential read of facts_vec (cell by cell), into arrays
        sized from the row count: no growth, no sort, no second copy."""
        parts = partitions(conn)
        self._centroids = centroids(conn, parts)
        n = code_count(conn)
        width = int(
            conn.execute(select(meta.c.value).where(meta.c.key == "embedding_width")).scalar() or 0
        )
        nbytes = bits_width(width)
        ids = np.empty(n, dtype=np.int64)
        bits = np.empty((n, nbytes), dtype=np.uint8)
        approx = np.empty((n, width), dtype=np.int8)
        cells = np.empty(n, dtype=np.int64)
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        filled = 0
        try:
            cursor.execute("SELECT list, fact_id, code FROM facts_vec")
            while filled < n:
                rows = cursor.fetchmany(LOAD_BATCH)
                if not rows:
                    break
                rows = rows[: n - filled]
                k = len(rows)
                cells[filled : filled + k] = [r[0] for r in rows]
                ids[filled : filled + k] = [r[1] for r in rows]
                block = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint8)
                block = block.reshape(k, nbytes + width)
                bits[filled : filled + k] = block[:, :nbytes]
                approx[filled : filled + k] = block[:, nbytes:].view(np.int8)
                filled += k
        finally:
            cursor.close()
        count = max(parts.cells, int(cells[:filled].max()) + 1 if filled else 1)
        self._cells = [_Cell() for _ in range(count)]
        # Rows come cell by cell (the table's clustering): each cell is one slice.
        bounds = np.searchsorted(cells[:filled], np.arange(count + 1))
        for cell, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            if hi > lo:
                self._cells[cell].segments.append(
                    [ids[lo:hi], bits[lo:hi], approx[lo:hi], int(hi - lo), int(lo)]
                )
        self._loaded = Loaded(ids[:filled], bits[:filled], approx[:filled])
        self._appended = []
        self._members = {}
        self._size, self._nbytes = filled, nbytes
        self._last_seq = last
        self.loads += 1

    def _catch_up(self, conn: Connection, last: int) -> None:
        while self._last_seq < last:
            rows = conn.execute(_LOGGED_SINCE, {"after": self._last_seq, "last": last}).all()
            if not rows:
                break  # log rows whose code went since (a rebuild): nothing to add
            for row in rows:
                if row.list >= len(self._cells):
                    self._cells.extend(_Cell() for _ in range(row.list + 1 - len(self._cells)))
                code = np.frombuffer(row.code, dtype=np.uint8)
                begun = self._cells[row.list].append(
                    row.fact_id, code[: self._nbytes], code[self._nbytes :].view(np.int8)
                )
                if begun is not None:
                    self._appended.append(begun)
                self._size += 1
            self._last_seq = rows[-1].seq
        self._last_seq = last

    def members_known(self, tokens: tuple[str, ...]) -> NDArray[np.int64] | int | None:
        """A reader part's facts as last read, the bound it was found to pass, or None."""
        with self._lock:
            return self._members.get(tokens)

    def remember_members(self, tokens: tuple[str, ...], found: NDArray[np.int64] | int) -> None:
        with self._lock:
            if len(self._members) >= MEMBERS_KEPT:
                self._members.clear()
            self._members[tokens] = found

    def nbytes(self) -> int:
        """Memory the codes and ids take (capacity included)."""
        with self._lock:
            return sum(
                s[0].nbytes + s[1].nbytes + s[2].nbytes for c in self._cells for s in c.segments
            )

    def flat_codes(self) -> NDArray[np.uint8]:
        """Every code in one array (a copy): for benches that compare with a flat scan."""
        with self._lock:
            parts = [s[1][: s[3]] for c in self._cells for s in c.segments]
        return np.concatenate(parts) if parts else np.empty((0, self._nbytes), np.uint8)

    def probe(self, query: NDArray[np.float32]) -> Probe:
        """The cells nearest the query, to be examined in that order."""
        with self._lock:
            cells = [list(c.segments) for c in self._cells]
            counts = [[s[3] for s in c] for c in cells]
            centers = self._centroids
            loaded = self._loaded
            appended = [(s, s[3]) for s in self._appended]
        if centers is None or len(centers) != len(cells):
            centers = None  # one cell, or cells being re-trained: in their own order
        return Probe(cells, counts, centers, query, self._size, loaded, appended)


@dataclass(frozen=True)
class Loaded:
    """The codes loaded at start, in three arrays aligned by row."""

    ids: NDArray[np.int64]
    bits: NDArray[np.uint8]
    approx: NDArray[np.int8]


class Probe:
    """One query's pass over the index: candidates in batches, each batch from the
    next nearest cells (at least POOL codes), best first."""

    def __init__(
        self,
        cells: list[list[list]],
        counts: list[list[int]],
        centers: NDArray[np.float32] | None,
        query: NDArray[np.float32],
        total: int,
        loaded: Loaded,
        appended: list[tuple[list, int]] | None = None,
    ) -> None:
        self._cells, self._counts, self._centers = cells, counts, centers
        self._order: NDArray[np.intp] | None = None  # the cells nearest first, when asked
        # The codes loaded at start (each cell's first segment a slice of these arrays),
        # and the segments begun since with their rows filled now.
        self._loaded = loaded
        self._appended = appended or []
        self._next = 0
        self.query = query
        self.query_code = binary_codes(query.reshape(1, -1))[0]
        self.total = total
        self.examined_cells = 0
        self.pooled = 0

    def pool(self, at_least: int) -> tuple[list[list], NDArray[np.int64], NDArray[np.uint8]]:
        """The segments of the next cells (nearest first) until `at_least` codes are
        taken, with their ids and sign bits concatenated; empty when every cell has
        been taken."""
        segments: list[list] = []
        taken = 0
        if self._order is None:
            self._order = (
                np.arange(len(self._cells))
                if self._centers is None
                else np.argsort(-(self._centers @ self.query), kind="stable")
            )
        while self._next < len(self._order) and (
            taken < at_least or self.examined_cells < MIN_PROBE
        ):
            cell = int(self._order[self._next])
            self._next += 1
            self.examined_cells += 1
            for segment, rows in zip(self._cells[cell], self._counts[cell], strict=True):
                if rows == 0 or segment[1].shape[1] != self.query_code.shape[0]:
                    continue
                segments.append(
                    [segment[0][:rows], segment[1][:rows], segment[2][:rows], segment[4]]
                )
                taken += rows
        self.pooled += taken
        if not segments:
            return [], np.empty(0, np.int64), np.empty((0, len(self.query_code)), np.uint8)
        ids = np.concatenate([s[0] for s in segments])
        bits = np.concatenate([s[1] for s in segments])
        return segments, ids, bits

    def ranked(self, at_least: int, head: int) -> tuple[NDArray[np.int64], NDArray]:
        """Fact ids from the next nearest cells (at least `at_least` codes), best first,
        with their approximate cosine similarity: the nearest by Hamming distance (an
        eighth of the pool, at least MIN_HEAD, at most `head`), ranked by their int8
        approximations. Empty when every cell is taken."""
        segments, ids, bits = self.pool(at_least)
        if len(ids) == 0:
            return ids, np.empty(0, np.float32)

        def approx_of(top: NDArray[np.intp]) -> NDArray[np.int8]:
            # The int8 rows of the head, no pool-wide copy: rows loaded at start are one
            # gather from the loaded array, rows appended since one per segment.
            starts = np.cumsum([0] + [len(s[0]) for s in segments])
            which = np.searchsorted(starts, top, side="right") - 1
            local = top - starts[which]
            offsets = np.array([s[3] for s in segments], dtype=np.int64)[which]
            loaded = offsets >= 0
            approx = np.empty((len(top), len(self.query)), dtype=np.int8)
            approx[loaded] = self._loaded.approx[offsets[loaded] + local[loaded]]
            for number in np.unique(which[~loaded]):
                rows = which == number
                approx[rows] = segments[number][2][local[rows]]
            return approx

        return self._head_ranked(ids, bits, _head_size(len(ids), head), approx_of)

    def within(
        self, fact_ids: NDArray[np.int64], whole: bool = False
    ) -> tuple[NDArray[np.int64], NDArray]:
        """The codes of the facts among `fact_ids`, from every cell, ranked as ranked()
        ranks a pool: the nearest by Hamming distance (unless `whole`: all of them), then
        by int8 approximation. A walk over a reader's own part of the index, whatever
        cells it lies in (a flag lookup per code, the rest per fact asked about)."""
        wanted = np.asarray(fact_ids, dtype=np.int64)
        width = len(self.query_code)
        if len(wanted) == 0:
            return wanted, np.empty(0, np.float32)
        # One flag per fact id up to the largest asked about; the last one stays off,
        # for every id beyond it.
        flags = np.zeros(int(wanted.max()) + 2, dtype=bool)
        flags[wanted] = True
        beyond = len(flags) - 1
        # The codes loaded at start in one lookup, those appended since segment by segment.
        loaded = self._loaded
        rows = np.empty(0, np.intp)
        if loaded.bits.ndim == 2 and loaded.bits.shape[1] == width:
            rows = np.flatnonzero(flags[np.minimum(loaded.ids, beyond)])
        ids, bits, approx = [loaded.ids[rows]], [loaded.bits[rows]], []
        for segment, count in self._appended:
            if count == 0 or segment[1].shape[1] != width:
                continue
            hit = flags[np.minimum(segment[0][:count], beyond)]
            if hit.any():
                ids.append(segment[0][:count][hit])
                bits.append(segment[1][:count][hit])
                approx.append(segment[2][:count][hit])
        found = np.concatenate(ids)
        appended = np.concatenate(approx) if approx else np.empty((0, len(self.query)), np.int8)

        def approx_of(top: NDArray[np.intp]) -> NDArray[np.int8]:
            # Loaded rows gathered from the loaded array, the others from the segments'.
            from_loaded = top < len(rows)
            head = np.empty((len(top), len(self.query)), dtype=np.int8)
            head[from_loaded] = loaded.approx[rows[top[from_loaded]]]
            head[~from_loaded] = appended[top[~from_loaded] - len(rows)]
            return head

        head = len(found) if whole else _head_size(len(found), RANKED_HEAD)
        return self._head_ranked(found, np.concatenate(bits), head, approx_of)

    def _head_ranked(
        self,
        ids: NDArray[np.int64],
        bits: NDArray[np.uint8],
        head: int,
        approx_of: Callable[[NDArray[np.intp]], NDArray[np.int8]],
    ) -> tuple[NDArray[np.int64], NDArray]:
        """The `head` codes nearest by Hamming distance among `ids` (their sign `bits`),
        ranked by their int8 approximations (`approx_of` the head's positions), with
        that similarity, best first."""
        top = hamming_order(hamming(bits, self.query_code), head)
        similarity = _approximate(approx_of(top), self.query)
        order = np.argsort(-similarity, kind="stable")
        return ids[top[order]], similarity[order]


def _head_size(codes: int, at_most: int) -> int:
    """How many of a pool of `codes` are ranked by their int8 approximations: an eighth,
    at least MIN_HEAD, at most `at_most` (and never more than there are)."""
    return min(at_most, max(MIN_HEAD, codes // HEAD_SHARE), codes)


def _approximate(approx: NDArray[np.int8], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """The cosine similarity of each int8 approximation with `query`. In blocks of 256
    rows: the float32 copy of a block stays in cache. Converting the whole array first
    took 2-12 ms here against 0.3 ms for 8,000 rows (bench/search_bench.py)."""
    similarity = np.empty(len(approx), dtype=np.float32)
    for start in range(0, len(approx), 256):
        similarity[start : start + 256] = approx[start : start + 256].astype(np.float32) @ query
    similarity /= 127.0
    return similarity


def hamming_order(distances: NDArray[np.uint16], head: int) -> NDArray[np.intp]:
    """Positions of the `head` smallest distances, smallest first (ties: older first),
    then the rest in order: a partial sort when only the head is wanted."""
    if head < len(distances) // 2:
        part = np.argpartition(distances, head - 1)[:head]
        return part[np.lexsort((part, distances[part]))]
    return np.argsort(distances, kind="stable")
