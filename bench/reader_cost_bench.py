"""What a reader's search costs when the memory holds others' facts with its words.

    python -m bench.reader_cost_bench [--own 5000] [--others 100000] [--queries 40]
    python -m bench.reader_cost_bench --backend postgresql [--database-url URL] [--home DIR]
    python -m bench.reader_cost_bench --smoke        # seconds: what `make test` runs

Two memories, built side by side from search_bench's generator (the same texts and
vectors): "alone" holds the reader's own facts only (`agent`, who reads and writes
/agents/agent and nothing else); "shared" holds the same facts, stored first, and
then --others facts of other agents (/agents/o0 ... /agents/o49), drawn from the
same sentences, so they hold the reader's words and sit near its queries, and are
newer than its own. The reader searches both with the same queries through the use
case the route calls (Memory.search, the real model), each query first new to each
memory's process state and then again (its embedding cached), the two memories in
turn, query by query. Prints each mode's p50 in both and
their ratio (issue 33: at most 1.5), and checks that every page is the same in both:
what the reader cannot see changes nothing it is shown.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.db.engine import write_transaction
from app.runtime import open_runtime
from app.services import facts as fact_service
from app.services import policies as policy_service
from app.services import vector_index as vector_service
from app.usecases.memory import Memory, NewFact, SearchRequest
from bench import machine, search_bench
from bench.databases import Databases, analyse
from bench.search_bench import BATCH

READER = "agent"
OTHERS = 50  # the other agents the shared memory's extra facts belong to
MODES = ("keyword", "semantic", "hybrid")
BOUND = 1.5
ONNX_THREADS = "onnxruntime's choice, as a server makes it (embedding.threads 0)"


def build(
    rt: Any, own: int, others: int, unique: list[str], vectors: np.ndarray
) -> dict[str, float]:
    """The reader's `own` facts, then `others` facts of other agents (generator numbers
    after the reader's, so the same sentences come back in new mixes)."""
    memory = Memory(rt)
    with memory.transaction("default", write=True) as (conn, ctx):
        for action in ("read", "write"):
            policy_service.add_policy(
                conn, ctx, f"p, {READER}, path:/agents/{READER}/*, {action}, allow"
            )
    started = time.perf_counter()
    # The reader's batches end where its facts end: the generator draws per batch, so
    # both memories get the same texts and vectors for the reader's numbers.
    batches = [(a, min(a + BATCH, own)) for a in range(0, own, BATCH)]
    batches += [(a, min(a + BATCH, own + others)) for a in range(own, own + others, BATCH)]
    for start, stop in batches:
        texts, vecs = search_bench.generated(start, stop, unique, vectors)
        items = []
        for k, text in zip(range(start, stop), texts, strict=True):
            owner = READER if k < own else f"o{k % OTHERS}"
            items.append(NewFact(f"/agents/{owner}/s{(k // 50) % 10}", text))
        blobs = [v.astype("<f4").tobytes() for v in vecs]
        with memory.transaction("default", write=True) as (conn, ctx):
            fact_service.store_facts(conn, ctx, items, vectors=blobs)
    with write_transaction(rt.engine) as conn:
        # What the next start would do (open_runtime): train the cells.
        vector_service.repartition_if_stale(conn)
    # Without it each PostgreSQL memory was planned with statistics or without them by
    # chance (two runs' ratios went 0.55-1.78 on one code).
    analyse(rt.engine)
    return {"build_s": time.perf_counter() - started}


def asked(q: str, mode: str) -> str:
    """As bench.search_profile asks: keyword a few words, the others whole sentences."""
    return " ".join(q.split()[:3]) if mode == "keyword" else f"{q} {mode}"


def searches(rts: dict[str, Any], queries: list[str]) -> dict[str, dict[str, Any]]:
    """Each memory's first-time and seen-before latencies per mode, and every page's
    ids. The memories are asked in turn, query by query (which goes first alternates):
    a change in the machine's speed during the run falls on both alike."""
    memories = {name: Memory(rt) for name, rt in rts.items()}
    for memory in memories.values():
        memory.search(READER, SearchRequest(q="warm up the model and the caches", limit=10))
    out: dict[str, dict[str, Any]] = {name: {} for name in memories}
    for mode in MODES:
        for name in memories:
            out[name][mode] = {"first": [], "again": [], "pages": []}
        for run in ("first", "again"):
            for i, q in enumerate(queries):
                names = list(memories) if i % 2 == 0 else list(reversed(memories))
                for name in names:
                    request = SearchRequest(q=asked(q, mode), mode=mode, limit=10)
                    t0 = time.perf_counter()
                    page = memories[name].search(READER, request)
                    out[name][mode][run].append(time.perf_counter() - t0)
                    if run == "first":
                        out[name][mode]["pages"].append([r.fact.id for r in page.results])
    return out


def p50(values: list[float]) -> float:
    return search_bench.ms(values)[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--own", type=int, default=5000, help="the reader's facts")
    parser.add_argument("--others", type=int, default=100_000, help="other agents' facts")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--unique", type=int, default=4000, help="sentences embedded for real")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--database-url", help="a PostgreSQL server to use (bench/databases.py)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run, in seconds")
    parser.add_argument("--home", type=Path, help="keep the two memories (and pgdata) here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.own, args.others, args.queries, args.unique = 300, 1500, 4, 120
    machine.report_load(ONNX_THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        embedder, queries, unique, vectors = search_bench.model_and_corpus(
            root, args.unique, args.queries, database=args.backend
        )
        databases = Databases(args.backend, args.database_url, args.home)
        built: dict[str, Any] = {}
        rts: dict[str, Any] = {}
        try:
            print(databases.describe())
            for name, others in (("alone", 0), ("shared", args.others)):
                home = (args.home or root) / f"{name}-{args.own}-{others}"
                marker = home / "built.json"
                home.mkdir(parents=True, exist_ok=True)
                size = args.own + others
                kept = marker.exists() and (not databases.postgres or databases.exists(size))
                url = databases.url(size)
                rt = rts[name] = open_runtime(search_bench.settings_for(home, url=url))
                if kept:
                    built[name] = json.loads(marker.read_text())
                else:
                    built[name] = build(rt, args.own, others, unique, vectors)
                    marker.write_text(json.dumps(built[name]))
                rt.embedder = embedder
                rt.load_vector_index()
                print(f"  {name}: built in {built[name]['build_s']:.1f} s", file=sys.stderr)
            results = searches(rts, queries)
        finally:
            for rt in rts.values():
                rt.close()
            databases.close()
    print(
        f"\n{args.backend}: the reader's {args.own} facts alone, and with {args.others} "
        f"facts of {OTHERS} other agents; {args.queries} queries, p50 ms\n"
    )
    print(
        "| mode | alone, first | shared, first | ratio "
        "| alone, again | shared, again | ratio | pages the same |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode in MODES:
        a, s = results["alone"][mode], results["shared"][mode]
        same = sum(x == y for x, y in zip(a["pages"], s["pages"], strict=True))
        r1, r2 = p50(s["first"]) / p50(a["first"]), p50(s["again"]) / p50(a["again"])
        print(
            f"| {mode} | {p50(a['first']):.1f} | {p50(s['first']):.1f} | {r1:.2f} "
            f"| {p50(a['again']):.1f} | {p50(s['again']):.1f} | {r2:.2f} "
            f"| {same}/{len(a['pages'])} |"
        )
    print(f"\nissue 33's bound: each ratio at most {BOUND}")
    machine.report_load(ONNX_THREADS)


if __name__ == "__main__":
    main()
