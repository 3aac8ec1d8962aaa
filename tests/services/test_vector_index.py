"""The vector index: codes on disk, loaded whole at start, partitioned, never starving."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from app.db.engine import read_transaction, write_transaction
from app.db.tables import facts, facts_vec, facts_vec_centroids
from app.main import create_app
from app.runtime import Runtime, open_runtime
from app.services import facts as fact_service
from app.services import search as search_service
from app.services import vector_index as vector_service
from app.services.facts import NewFact
from app.services.vector_index import VectorIndex, binary_codes
from app.services.visibility import visible_current
from app.usecases.memory import Memory
from tests.conftest import TEST_WIDTH


@pytest.fixture(scope="module")
def backend() -> str:
    """The in-memory code index is SQLite's; PostgreSQL searches with HNSW in the
    database (tests/services/test_search.py runs on both)."""
    return "sqlite"


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    """Clustered like real embeddings: 12 directions, each with its own spread."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((12, TEST_WIDTH))
    vectors = centers[rng.integers(0, 12, n)] + 0.8 * rng.standard_normal((n, TEST_WIDTH))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def test_stored_vectors_unpack_to_their_rows_and_mixed_widths_are_refused() -> None:
    vectors = unit_vectors(5)
    blobs = [row.astype("<f4").tobytes() for row in vectors]
    unpacked = vector_service.unpack_blobs(blobs)
    assert unpacked.dtype == np.float32
    assert np.array_equal(unpacked, vectors)
    with pytest.raises(ValueError, match="different widths"):
        vector_service.unpack_blobs([*blobs, blobs[0][:-4]])
    with pytest.raises(ValueError):
        vector_service.unpack_blobs([])


@pytest.mark.parametrize("width_bytes", [3, 8, 48, 96])
def test_hamming_counts_every_differing_bit(width_bytes: int) -> None:
    rng = np.random.default_rng(width_bytes)
    codes = rng.integers(0, 256, (200, width_bytes), dtype=np.uint8)
    query = rng.integers(0, 256, width_bytes, dtype=np.uint8)
    bit_by_bit = np.unpackbits(codes ^ query, axis=1).sum(axis=1)
    assert np.array_equal(vector_service.hamming(codes, query), bit_by_bit)
    assert vector_service.hamming(codes, query).dtype == np.uint16


def store_vectors(rt: Runtime, vectors: np.ndarray, paths: list[str] | None = None) -> list[int]:
    ids: list[int] = []
    for start in range(0, len(vectors), 500):
        chunk = vectors[start : start + 500]
        items = [
            NewFact(paths[start + k] if paths else "/v", f"fact {start + k}")
            for k in range(len(chunk))
        ]
        with Memory(rt).transaction("default", write=True) as (conn, ctx):
            stored = fact_service.store_facts(
                conn, ctx, items, vectors=[v.astype("<f4").tobytes() for v in chunk]
            )
        ids += [f.id for f in stored]
    return ids


def exact_top(rt: Runtime, query: np.ndarray, k: int, subject: str = "default") -> list[int]:
    with Memory(rt).transaction(subject) as (conn, ctx):
        rows = conn.execute(
            select(facts.c.id, facts.c.embedding).where(
                visible_current(ctx), facts.c.embedding.is_not(None)
            )
        ).all()
    scores = [(-float(np.frombuffer(r.embedding, "<f4") @ query), r.id) for r in rows]
    return [fid for _, fid in sorted(scores)[:k]]


def semantic(rt: Runtime, query: np.ndarray, k: int = 10, subject: str = "default", **kw):
    with Memory(rt).transaction(subject) as (conn, ctx):
        q = search_service.Query("q", "semantic", k, query, **kw)
        return [fid for fid, _ in search_service.rank(conn, ctx, q, rt.vector_index).order]


def statements(rt: Runtime) -> list[str]:
    seen: list[str] = []

    @event.listens_for(rt.engine, "before_cursor_execute")
    def record(_conn, _cursor, sql, *_args) -> None:  # type: ignore[no-untyped-def]
        seen.append(sql)

    return seen


def test_each_embedded_fact_has_one_code_row_of_sign_bits_and_int8(rt: Runtime) -> None:
    vectors = unit_vectors(20)
    ids = store_vectors(rt, vectors)
    with read_transaction(rt.engine) as conn:
        rows = {r.fact_id: r for r in conn.execute(select(facts_vec)).all()}
    assert set(rows) == set(ids)
    for fid, vector in zip(ids, vectors, strict=True):
        code = np.frombuffer(rows[fid].code, np.uint8)
        assert code[: TEST_WIDTH // 8].tobytes() == binary_codes(vector).tobytes()
        approx = code[TEST_WIDTH // 8 :].view(np.int8).astype(np.float32) / 127
        assert np.abs(approx - vector).max() <= 0.5 / 127 + 1e-6
        assert rows[fid].list == 0  # a small memory has one cell


def test_a_restart_loads_the_codes_not_the_embeddings(rt: Runtime) -> None:
    """The fact rows (and their float32 vectors) are not read to build the index."""
    vectors = unit_vectors(300)
    ids = store_vectors(rt, vectors)
    restarted = open_runtime(rt.settings)
    seen = statements(restarted)
    restarted.load_vector_index()
    assert len(restarted.vector_index) == len(ids)
    assert restarted.vector_index.ready.is_set()
    assert seen and not any("embedding" in sql for sql in seen), seen
    assert any("FROM facts_vec" in sql for sql in seen)
    # The first search answers from that load: no second one.
    assert semantic(restarted, vectors[7], 1) == [ids[7]]
    assert restarted.vector_index.loads == 1
    restarted.close()


def test_the_server_is_ready_only_with_the_index_loaded(rt: Runtime, settings) -> None:
    store_vectors(rt, unit_vectors(50))
    restarted = open_runtime(settings)
    assert not restarted.vector_index.ready.is_set()
    with TestClient(create_app(settings, runtime=restarted)) as client:
        # The lifespan loaded the index before the first request could be served.
        body = client.get("/readyz").json()
        assert body["status"] == "ready"
        assert body["index"] == {"ok": True, "detail": "loaded"}
        assert restarted.vector_index.loads == 1
    restarted.close()


def test_readiness_says_so_when_the_index_did_not_load(rt: Runtime, settings, monkeypatch) -> None:
    restarted = open_runtime(settings)

    def broken(self: VectorIndex, conn) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(VectorIndex, "refresh", broken)
    with TestClient(create_app(settings, runtime=restarted)) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["index"]["ok"] is False
    restarted.close()


def test_cells_hold_each_code_under_its_nearest_centroid(rt: Runtime) -> None:
    vectors = unit_vectors(600)
    ids = store_vectors(rt, vectors)
    with read_transaction(rt.engine) as conn:
        rt.vector_index.refresh(conn)
    with write_transaction(rt.engine) as conn:
        assert vector_service.repartition(conn, cells=16) == 16
    with read_transaction(rt.engine) as conn:
        centers = vector_service.centroids(conn)
        rows = {r.fact_id: r.list for r in conn.execute(select(facts_vec)).all()}
        assert conn.execute(select(facts_vec_centroids.c.list)).scalars().all() == list(range(16))
    assert centers is not None
    assert rows == {fid: int(np.argmax(centers @ v)) for fid, v in zip(ids, vectors, strict=True)}
    # A later store is filed by the same centroids; a running index reloads whole.
    more = unit_vectors(5, seed=1)
    new_ids = store_vectors(rt, more)
    with read_transaction(rt.engine) as conn:
        cells = dict(conn.execute(select(facts_vec.c.fact_id, facts_vec.c.list)).tuples().all())
    assert [cells[i] for i in new_ids] == [int(np.argmax(centers @ v)) for v in more]
    assert semantic(rt, more[2], 1) == [new_ids[2]]
    assert rt.vector_index.loads == 2
    assert len(rt.vector_index) == len(ids) + len(new_ids)


def test_partitioned_search_matches_exact_search(rt: Runtime, monkeypatch) -> None:
    vectors = unit_vectors(1200)
    store_vectors(rt, vectors)
    with write_transaction(rt.engine) as conn:
        vector_service.repartition(conn, cells=24)
    # A query examines a few cells only (not every code), and still finds the nearest.
    monkeypatch.setattr(search_service, "POOL", 200)
    queries = unit_vectors(20, seed=3)
    hits = [len(set(semantic(rt, q)) & set(exact_top(rt, q, 10))) for q in queries]
    assert sum(hits) / (10 * len(queries)) >= 0.95


def test_a_selective_filter_still_fills_the_page(rt: Runtime, monkeypatch) -> None:
    """Filtering after a fixed-k pass starves a page: 3% of the facts match `under`."""
    vectors = unit_vectors(1000)
    paths = ["/rare" if k % 33 == 0 else "/common" for k in range(1000)]
    store_vectors(rt, vectors, paths)
    with write_transaction(rt.engine) as conn:
        vector_service.repartition(conn, cells=20)
    monkeypatch.setattr(search_service, "POOL", 100)
    with read_transaction(rt.engine) as conn:
        rare_path = _path_id(conn, "/rare")
        rare = set(conn.execute(select(facts.c.id).where(facts.c.path_id == rare_path)).scalars())
    for query in unit_vectors(5, seed=4):
        got = semantic(rt, query, 10, under="/rare")
        expected = sorted(rare, key=lambda fid: (-float(query @ _vector(rt, fid)), fid))[:10]
        assert got == expected


def _path_id(conn, path: str) -> int:  # type: ignore[no-untyped-def]
    return conn.exec_driver_sql("SELECT id FROM paths WHERE path = ?", (path,)).scalar_one()


def _vector(rt: Runtime, fid: int) -> np.ndarray:
    with read_transaction(rt.engine) as conn:
        blob = conn.execute(select(facts.c.embedding).where(facts.c.id == fid)).scalar_one()
    return np.frombuffer(blob, "<f4")


def test_memory_grows_in_segments_without_copying(rt: Runtime) -> None:
    """Appends fill per-cell segments: rows already there stay where they were."""
    store_vectors(rt, unit_vectors(100))
    with read_transaction(rt.engine) as conn:
        rt.vector_index.refresh(conn)
    first = rt.vector_index._cells[0].segments[0][1]
    for seed in range(5, 10):
        store_vectors(rt, unit_vectors(100, seed=seed))
        with read_transaction(rt.engine) as conn:
            rt.vector_index.refresh(conn)
    assert rt.vector_index._cells[0].segments[0][1] is first
    assert len(rt.vector_index) == 600
    assert rt.vector_index.loads == 1


@pytest.mark.parametrize("grown", [False, True])
def test_partitions_go_stale_when_the_memory_outgrows_them(grown: bool) -> None:
    parts = vector_service.Partitions("t", 100, 30_000)
    assert parts.stale(120_000 if grown else 100_000) is grown
    assert vector_service.Partitions("", 1, 0).stale(vector_service.PARTITION_FROM)


def test_a_start_gives_a_grown_memory_new_cells(rt: Runtime, monkeypatch) -> None:
    monkeypatch.setattr(vector_service, "PARTITION_FROM", 200)
    store_vectors(rt, unit_vectors(300))
    with read_transaction(rt.engine) as conn:
        assert vector_service.partitions(conn).cells == 1
    restarted = open_runtime(rt.settings)
    with read_transaction(restarted.engine) as conn:
        parts = vector_service.partitions(conn)
        assert parts.cells == vector_service.cell_count(300) and parts.trained_on == 300
        assert not vector_service.partitions_stale(conn)
    restarted.close()


def test_a_readers_part_is_forgotten_when_the_index_reloads(rt: Runtime) -> None:
    """The members a reader's walk keeps between searches hold only while fact ids grow;
    a wipe (an import into a fresh memory: new facts may take old ids) clears the codes
    and bumps the generation, and the reload forgets every part kept."""
    store_vectors(rt, unit_vectors(40))
    index = rt.vector_index
    with read_transaction(rt.engine) as conn:
        index.refresh(conn)
    index.remember_members(("s1",), np.array([3, 5], np.int64))
    index.remember_members(("s2",), 1_000)
    assert index.members_known(("s1",)) is not None
    with write_transaction(rt.engine) as conn:
        vector_service.clear_codes(conn)
    with read_transaction(rt.engine) as conn:
        index.refresh(conn)
    assert index.members_known(("s1",)) is None and index.members_known(("s2",)) is None


def test_a_readers_part_is_walked_with_the_codes_appended_since_the_load(rt: Runtime) -> None:
    """Probe.within finds a reader's facts whether their codes were loaded at start or
    appended since, ranked by their approximations (the exact best near the top)."""
    vectors = unit_vectors(300, seed=4)
    first = store_vectors(rt, vectors[:200])
    with read_transaction(rt.engine) as conn:
        rt.vector_index.refresh(conn)
    later = store_vectors(rt, vectors[200:])
    with read_transaction(rt.engine) as conn:
        rt.vector_index.refresh(conn)
    query = vectors[7]
    members = np.array(sorted(first[::3] + later[::3]), np.int64)
    ids, _ = rt.vector_index.probe(query).within(members, whole=True)
    assert sorted(ids.tolist()) == members.tolist()  # every member, loaded or appended
    by_id = dict(zip(first + later, vectors, strict=True))
    exact = sorted(members.tolist(), key=lambda f: -float(by_id[f] @ query))
    assert ids[0] == exact[0] and set(exact[:3]) <= set(ids[:10].tolist())
