"""Fit hybrid search's ranking (app/services/ranking.json) on the quality bench's dev data.

    python -m bench.fit_ranking --beam PATH             # fit, write ranking.json, print dev
    python -m bench.fit_ranking --beam PATH --check     # fit, and fail unless it matches
    python -m bench.fit_ranking --beam PATH --ablate    # each feature left out, on held
    python -m bench.fit_ranking --smoke --out FILE      # seconds: one small memory a shape

Every dev question of the three shapes (bench/datasets.py: the generated chats, asked in
other words and in the words said; BEAM; the notes memories) is asked as a hybrid search
would ask it (Memory.hybrid_candidates): its candidates, their features, and which of them
answer it. Then, each by Newton's method (deterministic: the same data gives the same
numbers), each shape counting alike and within a shape each question alike:

1. the feature weights that best order each question's candidates: a conditional logit,
   the softmax over one question's candidates with its answers the likely ones, so what
   is learnt is which candidate answers, never how easy a question is;
2. the intercept and scale that turn that score into the chance a candidate answers (a
   logistic fit over every candidate, no-answer questions' included: Platt's);
3. semantic search's cosine floor, and the floor on a hybrid candidate's chance: of the
   values tried, the one that gives the most per question, recall@5 where there is an
   answer and 1 for an empty page where there is none (of cosine floors that tie, the
   lowest; of hybrid floors, the highest: choose_floor); hybrid's floor may not cost it
   its lead, on any shape, over either single mode.

`--ablate` refits without each feature in turn and reports the held parts (never used to
fit): a feature stays only if leaving it out costs there. Held is looked at for that and
for the final report only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.services import ranking
from app.services.ranking import Model
from app.usecases.memory import SearchRequest
from bench import datasets, machine
from bench import quality as qb

# The features the shipped model weighs (app.services.ranking.FEATURES names them all).
FEATURES = ("cosine", "keyword", "neighbourhood", "neighbourhood_squared", "in_span", "crowd")
# The shapes fitted on; the two views of the generated chats are one shape between them.
SHAPES = {"chats": "chats", "chats-worded": "chats", "beam": "beam", "notes": "notes"}
# The floors tried: none, then from 1e-4 to 0.5 in even steps of the logarithm; and
# semantic search's cosine floors, none then every hundredth from 0 to 0.6.
FLOORS = [0.0, *(float(f) for f in np.geomspace(1e-4, 0.5, 75))]
COSINE_FLOORS = [-1.0, *(round(c / 100, 2) for c in range(61))]
# How far a number of a new fit may lie from the kept file's and still reproduce it
# (--check). The file holds six decimals, and two fits from empty embedding caches on two
# fresh states of the bench machine (2026-12-06 and -07) gave two weights 1e-6 apart: the
# last digit of a number that sits on a rounding edge, which no page's order can feel.
TOLERANCE = 1e-5
L2 = 1e-3  # a little ridge: features that move together still get one answer each
LIMIT = qb.LIMIT


@dataclass
class Asked:
    """One question's candidates: their features (a row each), which answer it."""

    view: str  # the shape and view it came from (chats, chats-worded, beam, notes)
    kind: str
    answers: int  # how many facts answer it (0: a no-answer question)
    features: dict[str, np.ndarray]
    nearest: np.ndarray  # true for the candidates among the nearest facts
    bm25: np.ndarray  # each candidate's keyword score (0: it holds no query word)
    label: np.ndarray  # 1.0 for a candidate that answers it


def collect(view: str, split: str, *, beam: Path | None, model: str) -> list[Asked]:
    """Every question of one view and split, asked as hybrid search asks it."""
    corpora = datasets.load(view, split, beam_path=beam)
    out = []
    with qb.build_all(corpora, model=model) as handles:
        for h in handles:
            for q in h.corpus.questions:
                h.clock.at(q.asked_at)
                request = SearchRequest(q=q.text, mode="hybrid", limit=LIMIT, peek=True)
                found = h.memory.hybrid_candidates("default", request)
                relevant = set(q.relevant)
                label = np.array([float(h.names.get(f) in relevant) for f in found.ids])
                bm25 = np.array([found.keyword.get(f, 0.0) for f in found.ids])
                asked = Asked(
                    view, q.kind, len(relevant), found.features, found.nearest, bm25, label
                )
                out.append(asked)
    return out


def _question_weights(asked: Sequence[Asked]) -> list[float]:
    """Each shape counts alike, and within a shape each question alike."""
    families = {SHAPES[a.view] for a in asked}
    per_family = {f: sum(SHAPES[a.view] == f for a in asked) for f in families}
    return [1.0 / len(families) / per_family[SHAPES[a.view]] for a in asked]


def _newton(
    loss_and_steps: Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]], size: int
) -> np.ndarray:
    """Minimize a smooth convex loss by Newton's method, halving a step that does not
    lower it: (loss, gradient, hessian) at a point -> the minimizing point."""
    beta = np.zeros(size)
    loss, gradient, hessian = loss_and_steps(beta)
    for _ in range(200):
        step = np.linalg.solve(hessian, gradient)
        t = 1.0
        while True:
            trial = beta - t * step
            trial_loss, trial_gradient, trial_hessian = loss_and_steps(trial)
            if trial_loss <= loss or t < 1e-9:
                break
            t /= 2
        done = loss - trial_loss < 1e-13
        beta, loss, gradient, hessian = trial, trial_loss, trial_gradient, trial_hessian
        if done:
            break
    return beta


def fit_order(asked: Sequence[Asked], names: Sequence[str]) -> dict[str, float]:
    """The weights that best order each question's candidates: a conditional logit (the
    softmax over one question's candidates, its answers the likely ones), so what is
    learnt is which candidate of a question answers it, never how easy a question is."""
    data = [
        (np.column_stack([a.features[n] for n in names]), a.label, w)
        for a, w in zip(asked, _question_weights(asked), strict=True)
        if a.label.sum() > 0
    ]

    def loss_and_steps(beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        loss = 0.5 * L2 * float(beta @ beta)
        gradient = L2 * beta
        hessian = L2 * np.eye(len(beta))
        for x, y, w in data:
            s = x @ beta
            top = s.max()
            p = np.exp(s - top)
            total = p.sum()
            p /= total
            mean = p @ x
            loss -= w * (float(y @ s) / y.sum() - top - math.log(total))
            gradient = gradient - w * ((y @ x) / y.sum() - mean)
            centred = x - mean
            hessian = hessian + w * (centred * p[:, None]).T @ centred
        return loss, gradient, hessian

    beta = _newton(loss_and_steps, len(names))
    return {n: float(b) for n, b in zip(names, beta, strict=True)}


def calibrate(asked: Sequence[Asked], weights: dict[str, float]) -> tuple[float, float]:
    """(intercept, scale) that turn the ordering score into the chance a candidate
    answers its question (a logistic fit on every candidate, no-answer questions'
    included; Platt's calibration): the order stays, the floor gets a meaning."""
    scores, labels, shares = [], [], []
    for a, w in zip(asked, _question_weights(asked), strict=True):
        if len(a.label):
            scores.append(sum(weight * a.features[n] for n, weight in weights.items()))
            labels.append(a.label)
            shares.append(np.full(len(a.label), w / len(a.label)))
    x = np.column_stack([np.ones(sum(map(len, scores))), np.concatenate(scores)])
    y, w = np.concatenate(labels), np.concatenate(shares)

    def loss_and_steps(beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        z = x @ beta
        p = 1.0 / (1.0 + np.exp(-z))
        loss = float(w @ (np.logaddexp(0.0, z) - y * z))
        return loss, x.T @ (w * (p - y)), (x * (w * p * (1.0 - p))[:, None]).T @ x

    intercept, scale = _newton(loss_and_steps, 2)
    return float(intercept), float(scale)


@dataclass
class Figures:
    recall5: float
    mrr10: float
    empty: float  # share of the no-answer questions answered with an empty page
    answerable: int
    unanswerable: int


Page = Callable[[Asked], np.ndarray]


def hybrid_page(model: Model) -> Page:
    """A question's hybrid page: its candidates' labels in the model's order, above the
    floor, as app.services.search.rank makes it."""

    def page(a: Asked) -> np.ndarray:
        return a.label[[i for i, _ in model.page(a.features, LIMIT)]]

    return page


def semantic_page(min_cosine: float) -> Page:
    """A question's semantic page: the nearest facts at `min_cosine` or more."""

    def page(a: Asked) -> np.ndarray:
        cosine = a.features["cosine"]
        keep = np.flatnonzero(a.nearest & (cosine >= min_cosine))
        return a.label[keep[np.argsort(-cosine[keep], kind="stable")][:LIMIT]]

    return page


def keyword_page(a: Asked) -> np.ndarray:
    """A question's keyword page: the facts holding its words, best BM25 first."""
    bm25 = a.bm25
    keep = np.flatnonzero(bm25 > 0)
    return a.label[keep[np.argsort(-bm25[keep], kind="stable")][:LIMIT]]


def figures(asked: Sequence[Asked], page: Page | Model) -> Figures:
    make = hybrid_page(page) if isinstance(page, Model) else page
    r5, rr, empty = [], [], []
    for a in asked:
        page_of = make(a) if len(a.label) else a.label
        if a.answers == 0:
            empty.append(float(len(page_of) == 0))
            continue
        r5.append(float(page_of[:5].sum()) / a.answers)
        hits = np.flatnonzero(page_of[:10])
        rr.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
    mean = lambda v: float(np.mean(v)) if v else float("nan")  # noqa: E731
    return Figures(mean(r5), mean(rr), mean(empty), len(r5), len(empty))


def by_family(asked: Sequence[Asked]) -> dict[str, list[Asked]]:
    out: dict[str, list[Asked]] = {}
    for a in asked:
        out.setdefault(SHAPES[a.view], []).append(a)
    return out


def per_question(asked: Sequence[Asked], page: Page) -> float:
    """What a page rule gives per question, each shape alike: recall@5 for a question with
    an answer, 1 for an empty page on one without."""
    total = 0.0
    families = by_family(asked)
    for group in families.values():
        f = figures(group, page)
        answered = f.answerable / (f.answerable + f.unanswerable)
        total += answered * f.recall5 + (1.0 - answered) * (f.empty if f.unanswerable else 0.0)
    return total / len(families)


def best_cut(
    asked: Sequence[Asked],
    cuts: Sequence[float],
    page: Callable[[float], Page],
    *,
    highest: bool = False,
) -> float:
    """The lowest of the cuts (ascending) that gives the most per question; with
    `highest`, the highest of those."""
    ordered = list(reversed(cuts)) if highest else list(cuts)
    best, best_value = ordered[0], -1.0
    for cut in ordered:
        value = per_question(asked, page(cut))
        if value > best_value + 1e-12:
            best, best_value = cut, value
    return best


def choose_floor(asked: Sequence[Asked], model: Model) -> float:
    """The floor on a candidate's chance that gives the most per question without
    giving up hybrid's lead: on no shape may hybrid's recall@5 fall under either single
    mode's (semantic at its own fitted floor). The highest such, of FLOORS: the floor is
    what keeps facts nothing supports off a page (a starter fact, a nonsense query's
    nearest), and of floors that cost the same on dev the highest keeps the most off.
    (The lowest let a model whose floors tie from 0 up ship with no floor at all.)"""
    halves = (keyword_page, semantic_page(model.min_cosine))
    best = {
        family: max(figures(group, half).recall5 for half in halves)
        for family, group in by_family(asked).items()
    }
    allowed = [
        floor
        for floor in FLOORS
        if all(
            figures(group, replace(model, floor=floor)).recall5 >= best[family]
            for family, group in by_family(asked).items()
        )
    ] or [0.0]
    return best_cut(asked, allowed, lambda f: hybrid_page(replace(model, floor=f)), highest=True)


def fit_model(
    asked: Sequence[Asked], names: Sequence[str], embedding: str, fitted_on: str
) -> Model:
    """The ordering weights, their calibration, semantic search's cosine floor and the
    floor on the page, all from `asked`."""
    weights = fit_order(asked, names)
    intercept, scale = calibrate(asked, weights)
    min_cosine = best_cut(asked, COSINE_FLOORS, semantic_page)
    model = Model(weights, intercept, scale, 0.0, min_cosine, embedding, fitted_on)
    return replace(model, floor=choose_floor(asked, model))


def report(title: str, asked: Sequence[Asked], models: dict[str, Model | Page]) -> None:
    print(f"\n{title}: recall@5 / MRR@10 on answerable questions, empty pages on no-answer\n")
    views = sorted({a.view for a in asked})
    print("| model | " + " | ".join(views) + " |")
    print("|---|" + "---|" * len(views))
    for label, model in models.items():
        cells = []
        for view in views:
            f = figures([a for a in asked if a.view == view], model)
            cells.append(f"{f.recall5:.3f} / {f.mrr10:.3f} / {f.empty:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")


def trade(asked: Sequence[Asked], model: Model) -> None:
    """The floor's trade on `asked`: answerable recall@5 and empty pages on no-answer
    questions, per shape, at the fitted floor and at others."""
    print("\nthe floor's trade: recall@5 on answerable questions / empty pages on no-answer\n")
    views = sorted({a.view for a in asked})
    print("| floor | " + " | ".join(views) + " |")
    print("|---|" + "---|" * len(views))
    for floor in sorted({0.0, model.floor, 0.005, 0.01, 0.02, 0.05}):
        cells = []
        for view in views:
            f = figures([a for a in asked if a.view == view], replace(model, floor=floor))
            cells.append(f"{f.recall5:.3f} / {f.empty:.2f}")
        mark = " (fitted)" if floor == model.floor else ""
        print(f"| {floor:.4f}{mark} | " + " | ".join(cells) + " |")


def differences(kept: str, fitted: str) -> list[str]:
    """What tells the fitted model's file from the kept one: a number further than
    TOLERANCE from its kept value, or any other field not the same."""
    found: list[str] = []

    def compare(where: str, a: Any, b: Any) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                compare(f"{where}.{key}" if where else key, a.get(key), b.get(key))
        elif isinstance(a, int | float) and isinstance(b, int | float):
            if abs(a - b) > TOLERANCE:
                found.append(f"{where} {a} -> {b}")
        elif a != b:
            found.append(f"{where} {a!r} -> {b!r}")

    compare("", json.loads(kept), json.loads(fitted))
    return found


def gather(split: str, views: Sequence[str], beam: Path | None, model: str) -> list[Asked]:
    asked: list[Asked] = []
    for view in views:
        got = collect(view, split, beam=beam, model=model)
        print(f"  {view} {split}: {len(got)} questions, "
              f"{sum(len(a.label) for a in got)} candidates", flush=True)  # fmt: skip
        asked += got
    return asked


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beam", help="where BEAM was fetched (else EMBORNAL_BEAM)")
    parser.add_argument("--smoke", action="store_true", help="one small memory a shape")
    parser.add_argument("--out", type=Path, default=ranking.MODEL_FILE)
    parser.add_argument("--check", action="store_true", help="fail unless it matches --out")
    parser.add_argument("--ablate", action="store_true", help="each feature left out, on held")
    parser.add_argument("--model", choices=tuple(qb.MODELS), default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(machine.threads()))
    beam = datasets.beam_root(args.beam)
    views = [v for v in SHAPES if v != "beam" or beam is not None]
    if not args.smoke and beam is None:
        parser.error("the fit needs BEAM's dev part: --beam PATH or EMBORNAL_BEAM")
    split = "smoke" if args.smoke else "dev"
    model_name = args.model or ("fake" if args.smoke else "minilm-l6")
    machine.report_load()
    dev = gather(split, views, beam, model_name)
    fitted_on = (
        f"bench.fit_ranking on the dev parts of {', '.join(views)} "
        f"({len(dev)} questions, model {model_name})"
    )
    model = fit_model(dev, FEATURES, model_name, fitted_on)
    text = model.to_json()
    report("dev", dev, {
        "hybrid": model,
        "hybrid, no floor": replace(model, floor=0.0),
        "semantic": semantic_page(model.min_cosine),
        "semantic, no floor": semantic_page(-1.0),
        "keyword": keyword_page,
    })  # fmt: skip
    trade(dev, model)
    print("\n" + text)
    if args.check:
        differing = differences(args.out.read_text(encoding="utf-8"), text)
        if differing:
            print(f"the fit differs from {args.out}: " + "; ".join(differing), file=sys.stderr)
            raise SystemExit(1)
        print(f"the fit reproduces {args.out} (every number within {TOLERANCE:g})")
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    if args.ablate:
        held = gather("smoke" if args.smoke else "held", views, beam, model_name)
        models: dict[str, Model | Page] = {"all features": model}
        for name in FEATURES:
            rest = [n for n in FEATURES if n != name]
            models[f"without {name}"] = fit_model(dev, rest, model_name, "")
        models["semantic"] = semantic_page(model.min_cosine)
        report("held (each model fitted on dev)", held, models)
        trade(held, model)


if __name__ == "__main__":
    main()
