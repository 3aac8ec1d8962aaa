"""Where one search spends its time, stage by stage, with the real offline model.

    python -m bench.search_profile [--facts 10000] [--queries 60] [--smoke]

Builds a memory of `--facts` real English sentences (the standard library's
comments, bench/corpus.py) readable in part by a subject `agent` through 50
policy lines, then runs each query through the use case the HTTP route calls
(Memory.search): prepare (embed the query, no transaction), rank in a read
snapshot, deliver (hydrate the page, count the recalls) in a write transaction.
Each query is new to the process the first time (a first search's cost); the
same queries are then run again (the query cache's embedding).

Stages are timed by wrapping the service functions by name: embed = prepare();
rank keyword / rank semantic = keyword_ranking / semantic_ranking; fuse = the
rest of rank(); hydrate = facts.hydrate; recall writes = facts.recall_visible (the
recheck and the recall, one UPDATE); total = everything a request pays, the ACL
compilation and both transactions included.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.db.engine import read_transaction
from app.dirs import Dirs
from app.embeddings.loader import load_embedder
from app.runtime import open_runtime
from app.services import facts as fact_service
from app.services import policies as policy_service
from app.services import search as search_service
from app.services.facts import NewFact
from app.settings import Settings
from app.usecases.memory import Memory, SearchRequest
from bench.corpus import sentences

OUT = Path(__file__).parent / "out"
MODEL, WIDTH = "minilm-l6", 384
TOP_DIRS = 20
MODES = ("keyword", "semantic", "hybrid")
STAGES = (
    "embed",
    "rank keyword",
    "rank semantic",
    "fuse",
    "hydrate",
    "recall writes",
    "total",
    "total, query seen before",
)


def policy_lines() -> list[str]:
    """50 lines for `agent` through a role: subtrees, nodes, tags and denies (~60% visible)."""
    lines = ["g, agent, analyst"]
    lines += [f"p, analyst, path:/d{d}/*, read, allow" for d in range(0, TOP_DIRS, 2)]
    lines += [f"p, agent, path:/d{d}/s0, read, allow" for d in range(1, TOP_DIRS, 2)]
    lines += [f"p, agent, tag:topic=t{g}, read, allow" for g in range(10)]
    lines += [f"p, agent, path:/d{d}/s9/*, read, deny" for d in range(0, TOP_DIRS, 4)]
    lines += [f"p, analyst, tag:team=x{g}, read, allow" for g in range(12)]
    lines.append("p, agent, tag:secret=yes, read, deny")
    return lines[:50]


def embeddings(embedder: Any, texts: list[str]) -> np.ndarray:
    """The documents' vectors, computed once per corpus and kept under bench/out."""
    import hashlib

    OUT.mkdir(exist_ok=True)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = OUT / f"profile-{MODEL}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    print(f"embedding {len(texts)} facts once (kept in {path}) ...", file=sys.stderr)
    vectors = embedder.embed_documents(texts)
    np.save(path, vectors)
    return vectors


def build(home: Path, texts: list[str], vectors: np.ndarray) -> Any:
    settings = Settings(
        dirs=Dirs(home, home, home), embedding={"model": "none", "width": WIDTH, "download": False}
    )
    rt = open_runtime(settings)
    memory = Memory(rt)
    for start in range(0, len(texts), 1000):
        items, blobs = [], []
        for k in range(start, min(start + 1000, len(texts))):
            tags = {"topic": f"t{k % 40}"} | ({"secret": "yes"} if k % 97 == 0 else {})
            items.append(NewFact(f"/d{k % TOP_DIRS}/s{(k // TOP_DIRS) % 10}", texts[k], tags))
            blobs.append(vectors[k].astype("<f4").tobytes())
        with memory.transaction(write=True) as (conn, ctx):
            fact_service.store_facts(conn, ctx, items, vectors=blobs)
    with memory.transaction(write=True) as (conn, ctx):
        for line in policy_lines():
            policy_service.add_policy(conn, ctx, line)
    return rt


class Timers:
    """Wraps functions by name and adds up their time per search."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, stage: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.current[stage] += time.perf_counter() - t0

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def take(self) -> dict[str, float]:
        out, self.current = dict(self.current), defaultdict(float)
        return out

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()


def one_search(rt: Any, timers: Timers, q: str, mode: str) -> dict[str, float]:
    """As the route does it (Memory.search); returns seconds per stage."""
    t0 = time.perf_counter()
    found = Memory(rt).search("agent", SearchRequest(q=q, mode=mode, limit=10))
    total = time.perf_counter() - t0
    stages = timers.take()
    assert found.mode == mode
    rank_parts = stages.get("rank keyword", 0.0) + stages.get("rank semantic", 0.0)
    return {
        "embed": stages.get("embed", 0.0),
        "rank keyword": stages.get("rank keyword", 0.0),
        "rank semantic": stages.get("rank semantic", 0.0),
        "fuse": max(0.0, stages.get("rank", 0.0) - rank_parts),
        "hydrate": stages.get("hydrate", 0.0),
        "recall writes": stages.get("recall writes", 0.0),
        "total": total,
    }


def asked(q: str, mode: str) -> str:
    """Keyword queries are a few words, as people type them; the others whole sentences,
    with the mode's name after them so that each mode's are new to the query cache (a
    keyword search embeds nothing: its words are left as they are)."""
    return " ".join(q.split()[:3]) if mode == "keyword" else f"{q} {mode}"


def profile(rt: Any, queries: list[str]) -> dict[str, dict[str, list[float]]]:
    timers = Timers()
    timers.wrap(search_service, "prepare", "embed")
    timers.wrap(search_service, "rank", "rank")
    timers.wrap(search_service, "keyword_ranking", "rank keyword")
    timers.wrap(search_service, "semantic_ranking", "rank semantic")
    timers.wrap(fact_service, "hydrate", "hydrate")
    timers.wrap(fact_service, "recall_visible", "recall writes")
    try:
        out: dict[str, dict[str, list[float]]] = {}
        for mode in MODES:
            per_stage: dict[str, list[float]] = defaultdict(list)
            for q in queries:
                text = asked(q, mode)
                for stage, seconds in one_search(rt, timers, text, mode).items():
                    per_stage[stage].append(seconds)
            for q in queries:  # the same queries again: what a repeated search pays
                seconds = one_search(rt, timers, asked(q, mode), mode)["total"]
                per_stage["total, query seen before"].append(seconds)
            out[mode] = per_stage
        return out
    finally:
        timers.restore()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="a tiny run, in seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.facts, args.queries = 150, 4
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = Settings(
            dirs=Dirs(home / "w", home / "w", home / "w"),
            embedding={"model": MODEL, "width": WIDTH, "download": False},
        )
        embedder = load_embedder(settings)
        assert embedder is not None
        pool = sentences(args.facts + args.queries)
        texts, queries = pool[: args.facts], pool[args.facts :]
        vectors = embedder.embed_documents(texts) if args.smoke else embeddings(embedder, texts)
        rt = build(home, texts, vectors)
        rt.embedder = embedder
        with read_transaction(rt.engine) as conn:
            rt.vector_index.refresh(conn)
        one_search(rt, Timers(), "warm up the model and the caches", "hybrid")
        results = profile(rt, queries)
        rt.close()
    print(
        f"\nsearch profile: {args.facts} facts, {len(queries)} queries per mode, model {MODEL}, "
        "subject `agent` (50 policy lines), limit 10, recalls counted\n"
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


if __name__ == "__main__":
    main()
