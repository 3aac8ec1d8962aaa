"""How narrow PostgreSQL's HNSW walk may be for a store's `similar` check.

    python -m bench.similar_ef_bench [--facts 20000] [--asked 400] [--efs 20,40,100,200,400]
    python -m bench.similar_ef_bench --smoke        # seconds: what `make test` runs

A PostgreSQL memory of --facts short sentences (bench.corpus, embedded by minilm-l6), and
--asked more facts to store: half of them a stored sentence reworded a little (a
near-duplicate, which `similar` exists to name), half new sentences. For each, `similar`
as a store finds it (search.similar_to_many: up to 3 facts at or above the model's similar
cosine, its HNSW walks at each ef_search in turn) against the exact answer (every stored
vector scored). Prints, per ef_search, the share of asked facts whose `similar` names
exactly the exact answer's facts, the share with a near-duplicate that found one, and
the `similar` pass's ms a fact. The store's ef_search is
app.db.dialects.postgresql.SIMILAR_EF_SEARCH.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from app.db.dialects import postgresql
from app.embeddings import catalog
from app.runtime import open_runtime
from app.services import facts as fact_service
from app.services import search as search_service
from app.usecases.memory import Memory, NewFact
from bench import machine, search_bench
from bench.corpus import sentences
from bench.databases import Databases
from bench.search_bench import MODEL

BATCH = 1000
WANT = 3  # what a store names at most (app.usecases.memory._similar_batch)


def reworded(text: str, k: int) -> str:
    """A stored sentence said a little differently: one word dropped, or case changed."""
    words = text.split()
    if len(words) > 4 and k % 2 == 0:
        del words[len(words) // 2]
        return " ".join(words)
    return text.lower().rstrip(".") + "."


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=20_000)
    parser.add_argument("--asked", type=int, default=400)
    parser.add_argument("--efs", default="20,40,100,200,400")
    parser.add_argument("--database-url", help="a PostgreSQL server to use (bench/databases.py)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run, in seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.facts, args.asked, args.efs = 600, 40, "40,400"
    machine.report_load("onnxruntime's choice")
    efs = [int(e) for e in args.efs.split(",")]
    texts = sentences(args.facts + args.asked // 2)
    if len(texts) < args.facts + args.asked // 2:
        raise SystemExit(
            f"the corpus (bench/corpus.py) holds {len(texts)} sentences: "
            "--facts plus half of --asked must be at most that"
        )
    stored, fresh = texts[: args.facts], texts[args.facts :]
    rng = np.random.default_rng(0)
    picks = rng.choice(args.facts, args.asked - len(fresh), replace=False)
    asked = [reworded(stored[k], int(k)) for k in picks] + fresh
    with tempfile.TemporaryDirectory() as tmp:
        embedder, _, _, _ = search_bench.model_and_corpus(Path(tmp), 10, 1)
        threshold = catalog.similar_cosine(MODEL)
        assert threshold is not None
        databases = Databases("postgresql", args.database_url)
        try:
            print(databases.describe())
            home = Path(tmp) / "m"
            home.mkdir()
            rt = open_runtime(search_bench.settings_for(home, url=databases.url(args.facts)))
            try:
                memory = Memory(rt)
                vectors = np.asarray(embedder.embed_documents(stored), dtype=np.float32)
                for start in range(0, args.facts, BATCH):
                    items = [NewFact("/bench", t) for t in stored[start : start + BATCH]]
                    blobs = [v.astype("<f4").tobytes() for v in vectors[start : start + BATCH]]
                    with memory.transaction("default", write=True) as (conn, ctx):
                        fact_service.store_facts(conn, ctx, items, vectors=blobs)
                with memory.transaction("default") as (conn, _ctx):
                    ids = [r[0] for r in conn.exec_driver_sql("SELECT id FROM facts ORDER BY id")]
                # The /memory facts come first; the bench's facts are the last ones.
                stored_ids = np.asarray(ids[-args.facts :])
                queries = np.asarray(embedder.embed_documents(asked), dtype=np.float32)
                exact = []
                for query in queries:
                    cosine = vectors @ query
                    best = np.argsort(-cosine, kind="stable")[:WANT]
                    exact.append({int(stored_ids[b]) for b in best if cosine[b] >= threshold})
                print(
                    f"\n{args.facts} facts, {len(asked)} asked ({len(picks)} near-duplicates), "
                    f"{MODEL} similar cosine {threshold}\n"
                )
                print("| ef_search | same as exact | near-duplicates found | ms a fact |")
                print("|---|---|---|---|")
                for ef in efs:
                    postgresql.SIMILAR_EF_SEARCH = ef
                    with memory.transaction("default") as (conn, ctx):
                        started = time.perf_counter()
                        found = search_service.similar_to_many(
                            conn,
                            ctx,
                            rt.vector_index,
                            list(queries),
                            want=WANT,
                            min_cosine=threshold,
                            excludes=[frozenset()] * len(queries),
                        )
                        seconds = time.perf_counter() - started
                    got = [{fid for fid, _ in near} for near in found]
                    same = sum(g == e for g, e in zip(got, exact, strict=True)) / len(asked)
                    dups = [n for n, e in enumerate(exact[: len(picks)]) if e]
                    hit = sum(bool(got[n] & exact[n]) for n in dups) / max(len(dups), 1)
                    ms = 1000 * seconds / len(asked)
                    print(f"| {ef} | {same:.3f} | {hit:.3f} | {ms:.2f} |")
            finally:
                rt.close()
        finally:
            databases.close()
    machine.report_load("onnxruntime's choice")


if __name__ == "__main__":
    main()
