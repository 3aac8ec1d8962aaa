"""What hybrid search costs over semantic search, and over its fusion before issue 17.

    python -m bench.hybrid_cost [--facts 10000,100000] [--queries 100] [--rounds 2] [--home DIR]
    python -m bench.hybrid_cost --smoke                 # seconds: what `make test` runs

Issue 17 made hybrid fuse both keyword tiers with each match's share of the question
(recall@5 0.313 keyword, 0.424 semantic, 0.442 hybrid on the held-out split); before
it, hybrid fused the semantic ranking with the strict keyword tier alone. This bench
times, per query and in turn (so the machine's load falls on every variant alike):
semantic; hybrid as it runs (the keyword half on a worker thread while the query is
embedded and the semantic half ranks); hybrid with both halves in one thread; hybrid
ranking every relaxed match (no window); hybrid without the page rule (each text once,
which reads the candidates' texts); hybrid with its semantic half 20 deep in plain
cosine order (not centered: search.Centering reads 100); and hybrid with the strict
tier alone, no page rule and the semantic half not centered, the fusion of 7ca32f6.
Each search embeds its query afresh (no query cache), `peek`, as `Memory.search` runs
it for the routes. The memories are search_bench's (its generator and policies; reused
from --home). Prints p50 / p95 and each variant's p50 over the strict-tier-only one.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.embeddings.loader import load_embedder
from app.embeddings.query_cache import QueryCache
from app.runtime import open_runtime
from app.services import search as search_service
from app.usecases.memory import Memory, SearchRequest
from bench import machine
from bench.corpus import sentences
from bench.search_bench import MODEL, SUBJECT, build, cached_embeddings, settings_for

BEFORE = "hybrid, strict tier only (7ca32f6)"


class _Serial:
    """An executor that runs the task at once, in the caller's thread."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done


def _strict_half(conn: Any, ctx: Any, query: search_service.Query) -> search_service.KeywordHalf:
    """The keyword half as 7ca32f6 fused it: the strict tier alone, each match in full."""
    scope = search_service.Scope(ctx, query.under, tuple(query.tags), query.min_strength)
    depth = search_service._hybrid_depth(query.limit)
    hits = search_service.keyword_ranking(conn, scope, query.q, depth, relax=False)
    return search_service.KeywordHalf(hits, {hit.fact_id: 1.0 for hit in hits})


_centered_half = search_service.semantic_half
NOT_CENTERED = search_service.Centering(depth=search_service.HYBRID_DEPTH, weight=0.0)


def _plain_half(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
    """The semantic half as before its centering: 20 deep, nearest first."""
    return _centered_half(*args, **{**kwargs, "centering": NOT_CENTERED})


def _plain_page(conn: Any, fused: list[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
    """The page as the fusion orders it, a text shown again wherever it ranks."""
    return fused[:limit]


@contextmanager
def variant(
    memory: Memory,
    *,
    serial: bool,
    window: bool,
    strict: bool,
    each_text_once: bool,
    centered: bool,
) -> Iterator[None]:
    saved = (
        memory._workers,
        search_service.HYBRID_RELAXED_WINDOW,
        search_service.keyword_half,
        search_service._page_of_texts,
        search_service.semantic_half,
    )
    if serial:
        memory._workers = lambda: _Serial()  # type: ignore[assignment,return-value]
    if not window:
        search_service.HYBRID_RELAXED_WINDOW = None
    if strict:
        search_service.keyword_half = _strict_half
    if not each_text_once:
        search_service._page_of_texts = _plain_page
    if not centered:
        search_service.semantic_half = _plain_half
    try:
        yield
    finally:
        (
            memory._workers,
            search_service.HYBRID_RELAXED_WINDOW,
            search_service.keyword_half,
            search_service._page_of_texts,
            search_service.semantic_half,
        ) = saved


VARIANTS: dict[str, tuple[str, dict[str, bool]]] = {
    "semantic": ("semantic", {}),
    "hybrid (as it runs)": ("hybrid", {}),
    "hybrid, one thread": ("hybrid", {"serial": True}),
    "hybrid, one thread, every relaxed match": ("hybrid", {"serial": True, "window": False}),
    "hybrid, a text shown again (no page rule)": ("hybrid", {"each_text_once": False}),
    "hybrid, semantic half not centered": ("hybrid", {"centered": False}),
    BEFORE: (
        "hybrid",
        {"serial": True, "strict": True, "each_text_once": False, "centered": False},
    ),
}


def measure(home: Path, embedder: Any, queries: list[str], rounds: int) -> dict[str, list[float]]:
    rt = open_runtime(settings_for(home))
    rt.embedder = embedder
    rt.load_vector_index()
    memory = Memory(rt)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        for _ in range(rounds):
            for q in queries:
                for name, (mode, flags) in VARIANTS.items():
                    options = {
                        "serial": False,
                        "window": True,
                        "strict": False,
                        "each_text_once": True,
                        "centered": True,
                        **flags,
                    }
                    rt.query_cache = QueryCache()
                    with variant(memory, **options):
                        t0 = time.perf_counter()
                        memory.search(SUBJECT, SearchRequest(q=q, mode=mode, limit=10, peek=True))
                        times[name].append(time.perf_counter() - t0)
    finally:
        rt.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", default="10000,100000", help="sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the queries")
    parser.add_argument("--unique", type=int, default=4000, help="sentences embedded for real")
    parser.add_argument("--home", type=Path, help="search_bench's memories (reused if there)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args()
    if args.smoke:
        args.facts, args.queries, args.unique, args.rounds = "1500", 8, 120, 1
    machine.report_load()
    with tempfile.TemporaryDirectory() as weights:
        embedder = load_embedder(settings_for(Path(weights), MODEL))
    assert embedder is not None
    everything = sentences(args.unique + args.queries)
    queries, unique = everything[-args.queries :], everything[: -args.queries]
    unique_vectors = cached_embeddings(embedder, unique)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.home or Path(tmp)
        print(
            f"\nmodel {MODEL}; {len(queries)} queries x {args.rounds}, each variant in turn "
            f"per query; subject `{SUBJECT}`; in-process Memory.search, peek, no query cache\n"
        )
        print("| facts | variant | p50 ms | p95 ms | p50 / before |")
        print("|---|---|---|---|---|")
        for size in (int(s) for s in args.facts.split(",")):
            home = root / f"m{size}"
            build(home, size, unique, unique_vectors, None)
            times = measure(home, embedder, queries, args.rounds)
            before = statistics.median(times[BEFORE])
            for name, spent in times.items():
                spent.sort()
                p50, p95 = statistics.median(spent), spent[int(0.95 * (len(spent) - 1))]
                print(
                    f"| {size} | {name} | {p50 * 1000:.1f} | {p95 * 1000:.1f} | "
                    f"{p50 / before:.2f} |"
                )
    machine.report_load()


if __name__ == "__main__":
    main()
