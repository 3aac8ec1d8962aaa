"""Retrieval quality per search mode on a labelled set, with the real offline model.

    python -m bench.quality [--explore] [--smoke]

bench/quality_set.json holds 330 facts an agent might keep about a small
company and 60 questions of three kinds: paraphrase (other words, same
meaning), exact (ticket ids, error codes, versions, among near-miss
distractors) and multi (the answer spans two facts). Each question is searched
through the search service (limit 10, peek) in every mode; the table gives
recall@5 (the share of a question's relevant facts on the first five results)
and MRR@10 (1 / the position of the first relevant fact, 0 past ten), per mode
and per kind of question.

--explore also scores other ways to fuse the two halves of hybrid search
(reciprocal rank fusion with other k and weights, and score-based fusion) on
the same rankings, to choose the one the service uses.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.dirs import Dirs
from app.embeddings.loader import load_embedder
from app.runtime import open_runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services import search as search_service
from app.services.facts import NewFact
from app.settings import Settings
from app.usecases.memory import Memory

SET = Path(__file__).parent / "quality_set.json"
MODEL, WIDTH = "minilm-l6", 384
MODES = ("keyword", "semantic", "hybrid")
KINDS = ("paraphrase", "exact", "multi")
DEPTH = 20  # how deep each half ranks for --explore (the service's hybrid depth)


def load_set(smoke: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = json.loads(SET.read_text(encoding="utf-8"))
    facts, questions = data["facts"], data["questions"]
    if smoke:
        # Four questions of each kind, their facts, and some others around them.
        questions = [q for kind in KINDS for q in [x for x in questions if x["kind"] == kind][:4]]
        needed = {r for q in questions for r in q["relevant"]}
        facts = [f for f in facts if f["id"] in needed] + [
            f for f in facts if f["id"] not in needed
        ][:40]
    return facts, questions


def build(home: Path, embedder: Any, facts: list[dict[str, Any]]) -> tuple[Any, dict[int, str]]:
    settings = Settings(
        dirs=Dirs(home, home, home), embedding={"model": "none", "width": WIDTH, "download": False}
    )
    rt = open_runtime(settings)
    rt.embedder = embedder
    vectors = embedding_service.embed_for_store(embedder, [f["content"] for f in facts])
    with Memory(rt).transaction(write=True) as (conn, ctx):
        stored = fact_service.store_facts(
            conn, ctx, [NewFact(f["path"], f["content"]) for f in facts], vectors=vectors
        )
    return rt, {s["id"]: f["id"] for s, f in zip(stored, facts, strict=True)}


def metrics(found: Sequence[str], relevant: Sequence[str]) -> tuple[float, float]:
    recall = len(set(found[:5]) & set(relevant)) / len(relevant)
    rr = next((1 / n for n, fid in enumerate(found[:10], start=1) if fid in relevant), 0.0)
    return recall, rr


def searched(rt: Any, q: str, mode: str, limit: int = 10) -> search_service.Ranking:
    query = search_service.prepare(
        q=q, embedder=rt.embedder, mode=mode, limit=limit, cache=rt.query_cache
    )
    with Memory(rt).transaction() as (conn, ctx):
        return search_service.rank(conn, ctx, query, rt.vector_index)


def table(rows: dict[str, dict[str, list[tuple[float, float]]]], title: str) -> None:
    print(f"\n{title}\n")
    head = " | ".join(f"{k + ' R@5/MRR':>18}" for k in (*KINDS, "all"))
    print(f"| {'mode':<26} | {head} |")
    print(f"|{'-' * 28}|" + "|".join("-" * 20 for _ in (*KINDS, "all")) + "|")
    for name, per_kind in rows.items():
        cells = []
        for kind in (*KINDS, "all"):
            pairs = per_kind[kind]
            if not pairs:
                cells.append(f"{'-':>18}")
                continue
            recall = statistics.mean(p[0] for p in pairs)
            mrr = statistics.mean(p[1] for p in pairs)
            cells.append(f"{recall:>9.3f} / {mrr:.3f}")
        print(f"| {name:<26} | " + " | ".join(cells) + " |")


Fusion = Callable[[list[tuple[int, bool]], list[tuple[int, float]]], list[int]]


def rrf(k: float, keyword: float = 1.0, relaxed: float = 1.0, semantic: float = 1.0) -> Fusion:
    def fuse(kw: list[tuple[int, bool]], sem: list[tuple[int, float]]) -> list[int]:
        score: dict[int, float] = {}
        for n, (fid, strict) in enumerate(kw, start=1):
            score[fid] = (keyword if strict else relaxed) / (k + n)
        for n, (fid, _) in enumerate(sem, start=1):
            score[fid] = score.get(fid, 0.0) + semantic / (k + n)
        return [fid for fid, _ in sorted(score.items(), key=lambda p: (-p[1], p[0]))]

    return fuse


def score_based(alpha: float, relaxed: bool = True) -> Fusion:
    """alpha x min-max normalized cosine + (1 - alpha) x keyword 1/position."""

    def fuse(kw: list[tuple[int, bool]], sem: list[tuple[int, float]]) -> list[int]:
        kw = kw if relaxed else [hit for hit in kw if hit[1]]
        cos = dict(sem)
        low, high = (min(cos.values()), max(cos.values())) if cos else (0.0, 1.0)
        span = (high - low) or 1.0
        ids = set(cos) | {fid for fid, _ in kw}
        key = {fid: 1.0 / n for n, (fid, _) in enumerate(kw, start=1)}
        score = {
            fid: alpha * ((cos[fid] - low) / span if fid in cos else 0.0)
            + (1 - alpha) * key.get(fid, 0.0)
            for fid in ids
        }
        return [fid for fid, _ in sorted(score.items(), key=lambda p: (-p[1], p[0]))]

    return fuse


FUSIONS: dict[str, Fusion] = {
    "rrf k=60 (was)": rrf(60),
    "rrf k=10": rrf(10),
    "rrf k=60 relaxed x0.5": rrf(60, relaxed=0.5),
    "rrf k=30 relaxed x0.5": rrf(30, relaxed=0.5),
    "rrf k=60 relaxed x0.2": rrf(60, relaxed=0.2),
    "rrf k=60 strict x1.5": rrf(60, keyword=1.5),
    "rrf k=60 semantic x1.5": rrf(60, semantic=1.5),
    "rrf k=60 strict only": rrf(60, relaxed=0.0),
    "rrf k=30 strict only": rrf(30, relaxed=0.0),
    "rrf k=10 strict only": rrf(10, relaxed=0.0),
    "rrf k=60 strict only x2": rrf(60, keyword=2.0, relaxed=0.0),
    "rrf k=60 strict only x0.7": rrf(60, keyword=0.7, relaxed=0.0),
    "score cos/kw 0.5": score_based(0.5),
    "score cos/kw 0.7": score_based(0.7),
    "score cos/kw 0.7 strict only": score_based(0.7, relaxed=False),
    "score cos/kw 0.5 strict only": score_based(0.5, relaxed=False),
}


def explore(rt: Any, questions: list[dict[str, Any]], names: dict[int, str]) -> None:
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {k: [] for k in (*KINDS, "all")} for name in FUSIONS
    }
    for question in questions:
        kw_rank = searched(rt, question["q"], "keyword", DEPTH)
        kw = [(fid, bool(kw_rank.scores[fid]["all_words"])) for fid, _ in kw_rank.order]
        sem = searched(rt, question["q"], "semantic", DEPTH).order
        for name, fuse in FUSIONS.items():
            order = [f for f in fuse(kw, sem) if f in names]  # fused ids are all real
            pair = metrics([names[f] for f in order], question["relevant"])
            rows[name][question["kind"]].append(pair)
            rows[name]["all"].append(pair)
    table(rows, f"hybrid fusion options (each half {DEPTH} deep), recall@5 / MRR@10:")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--explore", action="store_true", help="compare fusion options too")
    parser.add_argument("--smoke", action="store_true", help="a small subset, in seconds")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    facts, questions = load_set(args.smoke)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = Settings(
            dirs=Dirs(home / "w", home / "w", home / "w"),
            embedding={"model": MODEL, "width": WIDTH, "download": False},
        )
        embedder = load_embedder(settings)
        assert embedder is not None
        rt, names = build(home, embedder, facts)
        rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
        for mode in MODES:
            rows[mode] = {k: [] for k in (*KINDS, "all")}
            for question in questions:
                ranking = searched(rt, question["q"], mode)
                found = [names[fid] for fid, _ in ranking.order if fid in names]
                pair = metrics(found, question["relevant"])
                rows[mode][question["kind"]].append(pair)
                rows[mode]["all"].append(pair)
        counts = {k: sum(q["kind"] == k for q in questions) for k in KINDS}
        table(
            rows,
            f"retrieval quality: {len(facts)} facts, {len(questions)} questions {counts}, "
            f"model {MODEL}; recall@5 / MRR@10:",
        )
        if args.explore:
            explore(rt, questions, names)
        rt.close()


if __name__ == "__main__":
    main()
