"""Ways to fuse hybrid search's halves, compared on the quality bench's DEV split.

    python -m bench.fusion_explore [--depth 40] [--model minilm-l6|fake] [--long] [--worded]

Each dev question is ranked once per half, as the service ranks them (the keyword
tiers, the semantic ranking with its cosines, the facts created in the time span the
question names, relative to the question's `asked_at`), and every fusion below is
applied to those same lists, so the comparison costs one search per half. Refuses
the held split: held is reported, never tuned on (bench/CONVGEN.md).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from app.embeddings import catalog
from app.services import search as search_service
from app.services import timewords
from app.services.search import (
    CENTERING,
    FUSION,
    SHARES_ONLY,
    Centering,
    Fusion,
    KeywordHalf,
    KeywordHit,
    Scope,
)
from bench import machine
from bench import quality as qb


@dataclass
class Lists:
    keyword: list[KeywordHit]  # the question as asked
    semantic: list[tuple[int, float]]  # (fact id, cosine distance), nearest first
    in_window: frozenset[int]
    names: dict[int, str]
    coverage: dict[int, float]  # keyword hits: the share of the query's content words held
    weighted: dict[int, float]  # the same, each word weighed by its rarity in the pool
    path_of: dict[int, str]  # every fact's path (its session), for the neighbour boost
    half: KeywordHalf  # the service's keyword half (search.keyword_half), as hybrid ranks it
    half_timed: KeywordHalf  # the same, the words naming the time span kept in it
    texts: dict[int, str]  # every candidate's content (search.each_text_once)
    # Hybrid's semantic half and the nearest facts created in the span the question names,
    # as the service ranks them (above the model's floor), per way of centering
    # (search.Centering): CENTERINGS, the service's own first.
    centered: dict[Centering, tuple[list[tuple[int, float]], list[tuple[int, float]]]]


# The service's centering, none (the half 20 deep in plain cosine order, as before it),
# and its neighbours on each parameter.
CENTERINGS = (
    CENTERING,
    Centering(depth=search_service.HYBRID_DEPTH, weight=0.0),
    Centering(depth=search_service.HYBRID_DEPTH),
    Centering(depth=40),
    Centering(depth=60),
    Centering(head=20),
    Centering(weight=0.25),
    Centering(weight=0.6),
    Centering(weight=0.75),
    Centering(weight=1.0),
)


def lists_for(handle: qb.Handle, question: qb.convgen.Question, depth: int, floor: float) -> Lists:
    """Every list the variants fuse, for one question; the centered ones (hybrid's
    semantic half and span list) above the cosine `floor`, as the service ranks them."""
    rt, memory = handle.runtime, handle.memory
    asked = datetime.fromisoformat(question.asked_at).timestamp()
    vector = rt.query_cache.embed_query(rt.embedder, question.text)
    span = timewords.window(question.text, asked)
    with memory.transaction("default") as (conn, ctx):
        scope = Scope(ctx)
        keyword = search_service.keyword_ranking(
            conn, scope, question.text, depth, relaxed_words=search_service.HYBRID_RELAXED_WORDS
        )
        semantic = search_service.semantic_ranking(conn, scope, rt.vector_index, vector, depth)
        asked_as = search_service.Query(question.text, "hybrid", 10, window=span)
        half = search_service.keyword_half(conn, ctx, asked_as)
        # search.untimed leaves the span's words out only when the query names a span.
        half_timed = search_service.keyword_half(conn, ctx, replace(asked_as, window=None))
        centered = {}
        for centering in CENTERINGS:
            lists = [
                search_service.semantic_half(
                    conn,
                    ctx,
                    replace(asked_as, vector=vector, min_cosine=floor),
                    rt.vector_index,
                    in_span=span_only,
                    centering=centering,
                )
                if span or not span_only
                else []
                for span_only in (False, True)
            ]
            centered[centering] = (lists[0], lists[1])
        ids = [h.fact_id for h in keyword + half.hits + half_timed.hits]
        ids += [f for f, _ in semantic]
        ids += [f for both in centered.values() for ranked in both for f, _ in ranked]
        in_window = search_service._created_in(conn, ids, span)
        wanted, held = search_service.held_words(conn, question.text, [h.fact_id for h in keyword])
        candidates = set(ids)
        texts = search_service._contents(conn, sorted(candidates))
    coverage = {f: len(w) / len(wanted) for f, w in held.items()}
    weighted = search_service.rarity_shares(wanted, held)
    paths = {handle.ids[f.id]: f.path for f in handle.conversation.facts}
    return Lists(
        keyword,
        semantic,
        in_window,
        handle.names,
        coverage,
        weighted,
        paths,
        half,
        half_timed,
        texts,
        centered,
    )


Variant = Callable[[Lists], list[int]]


def fused(fusion: Fusion, *, floor: float = -1.0, strict_only: bool = False) -> Variant:
    def run(ls: Lists) -> list[int]:
        keyword = ls.keyword
        if strict_only:
            keyword = [h for h in keyword if h.all_words]
        semantic = [(f, d) for f, d in ls.semantic if 1 - d >= floor]
        window = ls.in_window if fusion.time_boost else frozenset()
        return [f for f, _ in search_service.fuse(keyword, semantic, 10, fusion, None, window)]

    return run


def covered(
    k: float, scale: float, power: float, boost: float = 0.0, floor: float = -1, idf: bool = False
) -> Variant:
    """Keyword hits weighted by the share of the query's content words they hold."""

    def run(ls: Lists) -> list[int]:
        score: dict[int, float] = {}
        for n, hit in enumerate(ls.keyword, start=1):
            share = (ls.weighted if idf else ls.coverage).get(hit.fact_id, 0.0)
            score[hit.fact_id] = scale * share**power / (k + n)
        for n, (fid, _) in enumerate([p for p in ls.semantic if 1 - p[1] >= floor], start=1):
            score[fid] = score.get(fid, 0.0) + 1.0 / (k + n)
        for fid in ls.in_window & score.keys():
            score[fid] *= 1 + boost
        return [f for f, _ in sorted(score.items(), key=lambda p: (-p[1], p[0]))][:10]

    return run


def service(floor: float = -1.0) -> Variant:
    def run(ls: Lists) -> list[int]:
        semantic = [(f, d) for f, d in ls.semantic if 1 - d >= floor]
        order = search_service.fuse(
            ls.keyword, semantic, 10, shares=ls.weighted, in_window=ls.in_window
        )
        return [f for f, _ in order]

    return run


def neighbours(beta: float, new: bool) -> Variant:
    """The service's fusion, then each fact gains beta x the best fused score of the
    facts stored just before and after it at the same path (a conversation's adjacent
    turns); with `new`, neighbours outside both halves can enter the page."""

    def run(ls: Lists) -> list[int]:
        order = search_service.fuse(
            ls.keyword, ls.semantic, 100, shares=ls.weighted, in_window=ls.in_window
        )
        score = dict(order)
        boosted = dict(score)
        for fid, value in order:
            for other in (fid - 1, fid + 1):
                if ls.path_of.get(other) != ls.path_of.get(fid):
                    continue
                if other in score or new:
                    boosted[other] = boosted.get(other, 0.0) + beta * value
        return [f for f, _ in sorted(boosted.items(), key=lambda p: (-p[1], p[0]))][:10]

    return run


def hybrid(
    fusion: Fusion,
    *,
    timed: bool = False,
    each_text_once: bool = True,
    with_span: bool = True,
    centering: Centering = CENTERING,
) -> Variant:
    """The service's hybrid search with `fusion`: its keyword half (with `timed`, the
    time span's words kept in it), the semantic half ordered by `centering`, the nearest
    facts created in the span the question names (unless not `with_span`), the time
    boost, each text once on the page (unless not `each_text_once`)."""

    def run(ls: Lists) -> list[int]:
        semantic, in_span = ls.centered[centering]
        half = ls.half_timed if timed else ls.half
        in_span = in_span if with_span else []
        window = ls.in_window | {f for f, _ in in_span} if fusion.time_boost else frozenset()
        order = search_service.fuse(half.hits, semantic, None, fusion, half.shares, window, in_span)
        if each_text_once:
            return [f for f, _ in search_service.each_text_once(order, ls.texts, 10)]
        return [f for f, _ in order[:10]]

    return run


def single(half: str, floor: float = -1.0) -> Variant:
    def run(ls: Lists) -> list[int]:
        if half == "keyword":
            return [h.fact_id for h in ls.keyword][:10]
        return [f for f, d in ls.semantic if 1 - d >= floor][:10]

    return run


def variants(floor: float) -> dict[str, Variant]:
    """What was tried (issue 17), the service's choice among them."""
    out: dict[str, Variant] = {
        "keyword alone": single("keyword"),
        "semantic alone": single("semantic"),
        "hybrid as served, shares only (search.SHARES_ONLY)": hybrid(SHARES_ONLY),
        "hybrid as served (search.FUSION)": hybrid(FUSION),
        "hybrid as served, a text shown again before the others": hybrid(
            FUSION, each_text_once=False
        ),
        "hybrid as served, no ranking of the span's own facts": hybrid(FUSION, with_span=False),
        "hybrid as served, the time words kept in the keyword half": hybrid(FUSION, timed=True),
    }
    for centering in CENTERINGS[1:]:
        what = (
            "not centered (plain cosine order)"
            if centering.weight == 0.0
            else f"depth {centering.depth}, head {centering.head}, weight {centering.weight}"
        )
        out[f"hybrid as served, semantic half {what}"] = hybrid(FUSION, centering=centering)
    out |= {
        "strict tier only, k=60 (main before)": fused(Fusion(time_boost=0), strict_only=True),
        "both tiers at full weight, k=60": fused(Fusion(time_boost=0)),
        "keyword tiers in bm25 order, rarity shares": service(),
    }
    for k in (5, 10, 20, 60):
        for weight in (0.25, 0.5, 1.0):
            out[f"k={k} keyword x{weight}"] = fused(Fusion(k=k, keyword=weight, time_boost=0))
    for k in (10, 20, 60):
        for scale in (1.0, 2.0):
            for power in (1.0, 2.0):
                name = f"k={k} x{scale} share^{power}"
                out[f"{name} (plain)"] = covered(k, scale, power)
                out[f"{name} (rarity)"] = covered(k, scale, power, idf=True)
    for boost in (0.5, 1.0, 2.0):
        out[f"rarity k=60, time boost {boost}"] = covered(60, 1.0, 1.0, boost, idf=True)
    for beta in (0.1, 0.25, 0.5):
        out[f"the service, neighbour boost {beta}"] = neighbours(beta, new=False)
        out[f"the service, neighbour boost {beta}, new ones in"] = neighbours(beta, new=True)
    for floor in (0.2, 0.25, 0.3, 0.35, 0.4):
        out[f"the service, cosine floor {floor}"] = service(floor)
        out[f"semantic alone, cosine floor {floor}"] = single("semantic", floor)
    return out


def report(results: dict[str, qb.Metrics]) -> None:
    first = next(iter(results.values()))
    kinds = [(kind, name) for kind, name in qb.kinds_with_counts(first)]
    none_idx = qb.select(first, "none")
    head = " | ".join(f"{name} R@5 / MRR" for _, name in kinds)
    print(f"| variant | {head} | no-answer empty |")
    print("|---|" + "---|" * (len(kinds) + 1))
    for name, m in results.items():
        cells = []
        for kind, _ in kinds:
            idx = qb.select(m, kind)
            cells.append(f"{m.recall5[idx].mean():.3f} / {m.rr10[idx].mean():.3f}")
        empty = m.empty[none_idx].mean() if len(none_idx) else float("nan")
        print(f"| {name} | " + " | ".join(cells) + f" | {empty:.2f} |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=search_service.HYBRID_DEPTH)
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--long", action="store_true", help="the long conversations")
    parser.add_argument("--worded", action="store_true", help="questions in the turns' words")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(machine.threads()))
    split = "smoke" if args.smoke else "dev"
    floor = catalog.min_cosine(args.model)
    with qb.build_split(split, model=args.model, long=args.long, worded=args.worded) as handles:
        per_question = {
            q.id: lists_for(h, q, args.depth, floor)
            for h in handles
            for q in h.conversation.questions
        }
        questions = qb.questions_of(handles)
    results = {}
    for name, variant in variants(floor).items():
        rankings = {
            qid: [ls.names[f] for f in variant(ls) if f in ls.names]
            for qid, ls in per_question.items()
        }
        results[name] = qb.evaluate(rankings, questions)
    print(f"\nfusion variants on {split} (each half {args.depth} deep), recall@5 / MRR@10:\n")
    report(results)


if __name__ == "__main__":
    main()
