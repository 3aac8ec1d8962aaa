"""Where one search spends its time, stage by stage, with the real offline model.

    python -m bench.search_profile [--facts 10000,100000] [--queries 60] [--home DIR]
    python -m bench.search_profile --backend postgresql [--database-url URL] [--home DIR]
    python -m bench.search_profile --subject reader   # a reader of everything, one line
    python -m bench.search_profile --smoke        # seconds: what `make test` runs

Searches the memories bench/search_bench.py builds (the same generator, the same
50 policy lines through which the subject `agent` reads about half the memory;
built here when --home does not hold them already; with `--subject reader`, as a
subject whose one policy line lets it read everything, added to the memory when
missing: what the rules cost a search) through the use case the HTTP
route calls (Memory.search): prepare (embed the query, no transaction), rank in a
read snapshot, deliver (recheck, count the recalls, hydrate the page) in a write
transaction. The model runs as a server runs it by default (embedding.threads 0).
Each query is new to the process the first time (a first search's cost); the
same queries are then run again (the query cache's embedding).

Stages are timed by wrapping the service functions by name: embed = embed() (the
model, before any transaction); rank keyword / rank semantic = keyword_half /
semantic_ranking (PostgreSQL: its vectors.nearest); score = the rest of rank(), and
hybrid's score() (the candidates' features and the fitted model); hydrate = building
the page's facts from their rows (facts._as_facts: tags, links, neighbours); recall
writes = the rest of facts.recall_visible (the recheck, the recall and the rows, one
UPDATE ... RETURNING); total = everything a request pays, the ACL compilation and both
transactions included.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from app.runtime import open_runtime
from app.services import facts as fact_service
from app.services import policies as policy_service
from app.services import search as search_service
from app.usecases.memory import Memory, SearchRequest
from bench import machine, search_bench
from bench.databases import Databases
from bench.search_bench import MODEL
from bench.stages import Timers

MODES = ("keyword", "semantic", "hybrid")
# Who searches: search_bench's subject (50 policy lines, about half the memory), or a
# reader of everything through one line.
SUBJECTS = {
    "agent": "subject `agent` (50 policy lines, reads about half the memory)",
    "reader": "subject `reader` (1 policy line, reads everything)",
}
READER_LINE = "p, reader, path:/*, read, allow"
ONNX_THREADS = "onnxruntime's choice, as a server makes it (embedding.threads 0)"
STAGES = (
    "embed",
    "rank keyword",
    "rank semantic",
    "score",
    "hydrate",
    "recall writes",
    "total",
    "total, query seen before",
)  # and "total less embed": a first search's p50 less its embedding's p50


def one_search(
    rt: Any, timers: Timers, q: str, mode: str, subject: str = "agent"
) -> dict[str, float]:
    """As the route does it (Memory.search); returns seconds per stage."""
    t0 = time.perf_counter()
    found = Memory(rt).search(subject, SearchRequest(q=q, mode=mode, limit=10))
    total = time.perf_counter() - t0
    stages = timers.take()
    assert found.mode == mode
    rank_parts = stages.get("rank keyword", 0.0) + stages.get("rank semantic", 0.0)
    return {
        "embed": stages.get("embed", 0.0),
        "rank keyword": stages.get("rank keyword", 0.0),
        "rank semantic": stages.get("rank semantic", 0.0),
        # rank()'s own work (keyword, semantic), and hybrid's score() (features, model).
        "score": max(0.0, stages.get("rank", 0.0) - rank_parts) + stages.get("hybrid", 0.0),
        "hydrate": stages.get("hydrate", 0.0),
        # recall_visible builds the facts it hands back (timed as hydrate) by itself.
        "recall writes": max(0.0, stages.get("recall", 0.0) - stages.get("hydrate", 0.0)),
        "total": total,
        "results": float(len(found.results)),  # a count, not seconds
    }


def asked(q: str, mode: str) -> str:
    """Keyword queries are a few words, as people type them; the others whole sentences,
    with the mode's name after them so that each mode's are new to the query cache (a
    keyword search embeds nothing: its words are left as they are)."""
    return " ".join(q.split()[:3]) if mode == "keyword" else f"{q} {mode}"


def watch_search(timers: Timers) -> None:
    """Time a search's stages by name (bench.peer_bench times its searches so too)."""
    timers.wrap(search_service, "embed", "embed")
    timers.wrap(search_service, "rank", "rank")
    timers.wrap(search_service, "score", "hybrid")
    timers.wrap(search_service, "keyword_half", "rank keyword")
    timers.wrap(search_service, "semantic_ranking", "rank semantic")
    # On PostgreSQL the semantic half is the database's (HNSW), not semantic_ranking.
    from app.db.dialects.postgresql import PostgresVectors

    timers.wrap(PostgresVectors, "nearest", "rank semantic")
    timers.wrap(fact_service, "_as_facts", "hydrate")
    timers.wrap(fact_service, "recall_visible", "recall")


def profile(
    rt: Any, queries: list[str], subject: str = "agent"
) -> dict[str, dict[str, list[float]]]:
    timers = Timers()
    watch_search(timers)
    try:
        out: dict[str, dict[str, list[float]]] = {}
        for mode in MODES:
            per_stage: dict[str, list[float]] = defaultdict(list)
            for q in queries:
                text = asked(q, mode)
                for stage, seconds in one_search(rt, timers, text, mode, subject).items():
                    per_stage[stage].append(seconds)
            for q in queries:  # the same queries again: what a repeated search pays
                seconds = one_search(rt, timers, asked(q, mode), mode, subject)["total"]
                per_stage["total, query seen before"].append(seconds)
            out[mode] = per_stage
        return out
    finally:
        timers.restore()


def profile_size(
    size: int,
    home: Path,
    unique: list[str],
    vectors: np.ndarray,
    embedder: Any,
    queries: list[str],
    url: str | None = None,
    subject: str = "agent",
) -> dict[str, dict[str, list[float]]]:
    """The memory of search_bench at `size` (built in `home`, or the database at `url`,
    unless it is there), searched by `subject` with the server's default model settings."""
    search_bench.build(home, size, unique, vectors, url)
    rt = open_runtime(search_bench.settings_for(home, url=url))
    rt.embedder = embedder
    rt.load_vector_index()
    try:
        if subject == "reader":
            add_reader(rt)
        one_search(rt, Timers(), "warm up the model and the caches", "hybrid", subject)
        return profile(rt, queries, subject)
    finally:
        rt.close()


def add_reader(rt: Any) -> None:
    """The subject `reader`'s one line (READER_LINE), unless the memory holds it."""
    memory = Memory(rt)
    with memory.transaction("default", write=True) as (conn, ctx):
        held = {str(line) for line in policy_service.list_policies(conn, ctx)}
        if READER_LINE not in held:
            policy_service.add_policy(conn, ctx, READER_LINE)


def print_table(
    size: int, queries: int, results: dict[str, dict[str, list[float]]], subject: str = "agent"
) -> None:
    print(
        f"\nsearch profile: {size} facts, {queries} queries per mode, model {MODEL} "
        f"({ONNX_THREADS}), {SUBJECTS[subject]}, limit 10, recalls counted\n"
    )
    print(f"| {'stage (p50 ms)':<24} | " + " | ".join(f"{m:>8}" for m in MODES) + " |")
    print(f"|{'-' * 26}|" + "|".join("-" * 10 for _ in MODES) + "|")
    for stage in STAGES:
        cells = [f"{statistics.median(results[m][stage]) * 1000:8.2f}" for m in MODES]
        print(f"| {stage:<24} | " + " | ".join(cells) + " |")
    p95 = []
    for m in MODES:
        ordered = sorted(results[m]["total"])
        at = min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))
        p95.append(f"{ordered[at] * 1000:8.2f}")
    print(f"| {'total p95':<24} | " + " | ".join(p95) + " |")
    over = [
        statistics.median(results[m]["total"]) - statistics.median(results[m]["embed"])
        for m in MODES
    ]
    print(
        f"| {'total less embed (p50s)':<24} | "
        + " | ".join(f"{o * 1000:8.2f}" for o in over)
        + " |"
    )
    found = [f"{statistics.mean(results[m]['results']):8.1f}" for m in MODES]
    print(f"| {'results a page (mean)':<24} | " + " | ".join(found) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", default="10000,100000", help="sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument(
        "--unique", type=int, help="sentences embedded for real (search_bench's default)"
    )
    parser.add_argument("--home", type=Path, help="keep the memories here (search_bench's too)")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--database-url", help="a PostgreSQL server to use (bench/databases.py)")
    parser.add_argument(
        "--subject", choices=sorted(SUBJECTS), default="agent", help="who searches (see above)"
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny run, in seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.facts, args.queries, args.unique = "1500", 4, 120
    machine.report_load(ONNX_THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        largest = max(int(n) for n in args.facts.split(","))
        embedder, queries, unique, vectors = search_bench.model_and_corpus(
            Path(tmp), args.unique, args.queries, largest, database=args.backend
        )
        root = args.home or Path(tmp)
        databases = Databases(args.backend, args.database_url, args.home)
        try:
            print(databases.describe())
            for size in (int(n) for n in args.facts.split(",")):
                home = root / (f"pg-m{size}" if databases.postgres else f"m{size}")
                url = databases.url(size)
                results = profile_size(
                    size, home, unique, vectors, embedder, queries, url, args.subject
                )
                print_table(size, len(queries), results, args.subject)
        finally:
            databases.close()
    machine.report_load(ONNX_THREADS)


if __name__ == "__main__":
    main()
