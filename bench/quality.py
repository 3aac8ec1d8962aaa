"""Retrieval quality per search mode on three shapes of memory (bench/datasets.py).

    python -m bench.quality [--split dev|held] [--shape chats,chats-worded,beam,notes]
                            [--modes keyword,semantic,hybrid] [--model minilm-l6|fake]
                            [--beam PATH] [--exact] [--smoke]

Each memory (a conversation, a BEAM chat, a person's notes) gets a FRESH memory of its
own (a temporary EMBORNAL_HOME): its facts are stored through the store service with the
clock at each fact's time (supersedes and deletes at theirs), and each question is asked
through `Memory.search` (peek, limit 10) in every mode, with the clock at the question's
`asked_at`. The starter facts under /memory are there, as in every new memory.

Per shape, the tables give recall@5 and MRR@10 per mode and question kind with 95%
bootstrap intervals (questions resampled, 1000 times, fixed seed), then hybrid minus each
single mode (a paired bootstrap of the difference), and for the questions with no answer
the share answered with an EMPTY page beside answerable recall@5: the floor's trade.

Tune on dev only; held is reported, never looked at while deciding. The model's vectors
are kept between runs in bench/out/ (bench/embed_cache.py): a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from app.db import tables
from app.dirs import Dirs
from app.embeddings.base import Embedder
from app.embeddings.fake import FakeEmbedder
from app.embeddings.loader import load_embedder
from app.runtime import Runtime, open_runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services import visibility
from app.services.facts import NewFact
from app.services.vector_index import unpack_blobs
from app.settings import Settings
from app.usecases.memory import Memory, SearchRequest
from bench import datasets, machine
from bench.datasets import Ask, Corpus
from bench.embed_cache import CachedEmbedder

MODELS = {"minilm-l6": 384, "fake": 384}
MODES = ("keyword", "semantic", "hybrid")
LIMIT = 10
RESAMPLES = 1000
BOOTSTRAP_SEED = 17


@dataclass
class Handle:
    """One memory, built and ready to be searched."""

    corpus: Corpus
    runtime: Runtime
    memory: Memory
    clock: TurnClock
    ids: dict[str, int]  # the data's fact id -> the memory's fact id
    names: dict[int, str]  # and back


class TurnClock:
    """The memory's clock: set to each fact's time before it is stored, so created_at
    is the fact's, then to each question's asked_at before it is asked."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def at(self, iso: str) -> None:
        self.now = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def load_model(name: str, home: Path) -> Embedder:
    if name == "fake":
        return FakeEmbedder(MODELS["fake"], name="fake")
    settings = Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": name, "width": MODELS[name], "download": False},
    )
    embedder = load_embedder(settings)
    assert embedder is not None
    return CachedEmbedder(embedder)


def build_memory(corpus: Corpus, embedder: Embedder, home: Path) -> Handle:
    """A fresh memory holding the corpus: each fact stored at its time (superseding what
    it names), each deletion made at its time, in the order they happened."""
    settings = Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": "none", "width": MODELS.get(embedder.name, 384), "download": False},
    )
    runtime = open_runtime(settings)
    runtime.embedder = embedder
    clock = TurnClock()
    memory = Memory(runtime, clock=clock)
    ids: dict[str, int] = {}
    # The model runs before the write transaction, as Memory.store_batch does it.
    vectors = embedding_service.embed_for_store(embedder, [f.content for f in corpus.facts])
    vector_of = {f.id: v for f, v in zip(corpus.facts, vectors, strict=True)}
    events = [(f.created_at, 0, f) for f in corpus.facts]
    events += [(f.deleted_at, 1, f) for f in corpus.facts if f.deleted_at]
    events.sort(key=lambda e: (datetime.fromisoformat(e[0].replace("Z", "+00:00")), e[1]))
    with memory.transaction(write=True) as (conn, ctx):
        for when, deleting, item in events:
            clock.at(when)
            if deleting:
                fact_service.delete_fact(conn, ctx, ids[item.id])
                continue
            new = NewFact(
                item.path,
                item.content,
                item.tags,
                ids[item.supersedes] if item.supersedes else None,
            )
            stored = fact_service.store_facts(conn, ctx, [new], vectors=[vector_of[item.id]])
            ids[item.id] = stored[0].id
    return Handle(corpus, runtime, memory, clock, ids, {v: k for k, v in ids.items()})


@contextmanager
def build_all(
    corpora: Sequence[Corpus], *, model: str = "minilm-l6", progress: bool = False
) -> Iterator[list[Handle]]:
    """Every corpus in its own fresh memory (closed at the end)."""
    with tempfile.TemporaryDirectory(prefix="embornal-quality-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        embedder = load_model(model, root / "model")
        handles = []
        for corpus in corpora:
            started = time.perf_counter()
            handle = build_memory(corpus, embedder, root / corpus.id)
            stack.callback(handle.runtime.close)
            handles.append(handle)
            if progress:
                print(
                    f"  {corpus.id}: {len(corpus.facts)} facts, {len(corpus.questions)} "
                    f"questions, stored in {time.perf_counter() - started:.1f}s",
                    flush=True,
                )
        yield handles


def questions_of(handles: Sequence[Handle]) -> list[Ask]:
    return [q for h in handles for q in h.corpus.questions]


RankFn = Callable[[Handle, Ask], list[str]]


def rank_with(handles: Sequence[Handle], fn: RankFn) -> dict[str, list[str]]:
    """The ranking `fn(memory, question)` gives (the data's fact ids, best first) for
    every question, with the memory's clock at the question's asked_at."""
    out = {}
    for h in handles:
        for q in h.corpus.questions:
            h.clock.at(q.asked_at)
            out[q.id] = fn(h, q)
    return out


def search_mode(mode: str, limit: int = LIMIT) -> RankFn:
    """The service's own ranking: Memory.search in one mode, peeked (no recalls).
    A fact of the memory's own (the starter facts under /memory) is a wrong answer."""

    def rank(handle: Handle, question: Ask) -> list[str]:
        page = handle.memory.search(
            "default",
            SearchRequest(q=question.text, mode=mode, limit=limit, peek=True),  # type: ignore[arg-type]
        )
        return [handle.names.get(r.fact.id, f"memory-{r.fact.id}") for r in page.results]

    return rank


def exact_cosine(
    handle: Handle, question: Ask, limit: int = LIMIT, floor: float = -1.0
) -> list[str]:
    """The reference for semantic search: every current fact ranked by the exact cosine
    of its stored vector with the question's, no index, no floor unless given (`--exact`).
    What semantic search loses against it is lost in its own path (the index's
    approximation, the floor, the starter facts); what it shares is the model's. Written
    apart from the search service's own exact scoring (its walk's last resort) on purpose:
    a reference made of the code it checks would share its mistakes."""
    with handle.runtime.engine.connect() as conn:
        rows = conn.execute(
            sa.select(tables.facts.c.id, tables.facts.c.embedding).where(
                visibility.current_only(None), tables.facts.c.embedding.is_not(None)
            )
        ).all()
    if not rows:
        return []
    embedder = handle.runtime.embedder
    assert embedder is not None
    ids = [fid for fid, _ in rows]
    cosines = unpack_blobs([blob for _, blob in rows]) @ embedder.embed_query(question.text)
    order = np.argsort(-cosines, kind="stable")[:limit]
    return [handle.names.get(ids[i], f"memory-{ids[i]}") for i in order if cosines[i] >= floor]


# --- metrics ---------------------------------------------------------------------------


@dataclass
class Metrics:
    """Per-question figures, aligned with `questions` (answerable ones and no-answer)."""

    questions: list[Ask]
    recall5: np.ndarray
    recall10: np.ndarray
    rr10: np.ndarray
    empty: np.ndarray  # 1.0 when the page was empty (meaningful for no-answer questions)
    returned: np.ndarray  # the number of results


def evaluate(rankings: dict[str, list[str]], questions: Sequence[Ask]) -> Metrics:
    r5, r10, rr, empty, returned = [], [], [], [], []
    for q in questions:
        found = rankings.get(q.id, [])
        relevant = set(q.relevant)
        empty.append(float(not found))
        returned.append(float(len(found)))
        if not relevant:
            r5.append(0.0)
            r10.append(0.0)
            rr.append(0.0)
            continue
        r5.append(len(set(found[:5]) & relevant) / len(relevant))
        r10.append(len(set(found[:10]) & relevant) / len(relevant))
        rr.append(next((1 / n for n, f in enumerate(found[:10], 1) if f in relevant), 0.0))
    arr = np.asarray
    return Metrics(list(questions), arr(r5), arr(r10), arr(rr), arr(empty), arr(returned))


def bootstrap(values: np.ndarray, *, seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """The mean and its 95% percentile interval over RESAMPLES resamples."""
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(RESAMPLES, len(values)))
    means = values[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def select(m: Metrics, kind: str | None) -> np.ndarray:
    """Indexes of the questions of one kind (None: every answerable question; "-": every
    question with no answer)."""

    def keep(q: Ask) -> bool:
        if kind is None:
            return bool(q.relevant)
        if kind == "-":
            return not q.relevant
        return q.kind == kind

    return np.asarray([i for i, q in enumerate(m.questions) if keep(q)], dtype=int)


METRICS = (("recall5", "R@5"), ("rr10", "MRR@10"))


def cell(mean: float, low: float, high: float, signed: bool = False) -> str:
    fmt = "{:+.3f}" if signed else "{:.3f}"
    return f"{fmt.format(mean)} [{fmt.format(low)}, {fmt.format(high)}]"


def answered_kinds(m: Metrics) -> list[tuple[str | None, str]]:
    kinds = sorted({q.kind for q in m.questions if q.relevant})
    out: list[tuple[str | None, str]] = [(k, f"{k} ({len(select(m, k))})") for k in kinds]
    out.append((None, f"all ({len(select(m, None))})"))
    return out


def print_report(results: dict[str, Metrics]) -> None:
    first = next(iter(results.values()))
    columns = answered_kinds(first)
    for attr, label in METRICS:
        print(f"\n{label} per mode and question kind (mean [95% bootstrap interval]):\n")
        print("| mode | " + " | ".join(name for _, name in columns) + " |")
        print("|---|" + "---|" * len(columns))
        for mode, m in results.items():
            values = getattr(m, attr)
            cells = [cell(*bootstrap(values[select(m, kind)])) for kind, _ in columns]
            print(f"| {mode} | " + " | ".join(cells) + " |")
    if "hybrid" in results and len(results) > 1:
        hybrid = results["hybrid"]
        print("\nhybrid minus each single mode (paired bootstrap, mean [95% interval]):\n")
        print("| metric | vs | " + " | ".join(name for _, name in columns) + " |")
        print("|---|---|" + "---|" * len(columns))
        for attr, label in METRICS:
            for mode, m in results.items():
                if mode == "hybrid":
                    continue
                diff = getattr(hybrid, attr) - getattr(m, attr)
                cells = [cell(*bootstrap(diff[select(m, k)]), signed=True) for k, _ in columns]
                print(f"| {label} | {mode} | " + " | ".join(cells) + " |")
    none_idx = select(first, "-")
    if len(none_idx):
        answered = select(first, None)
        print(
            f"\nthe floor's trade: answerable R@5 ({len(answered)}) beside the share of the "
            f"{len(none_idx)} no-answer questions answered with an empty page\n"
        )
        print("| mode | answerable R@5 | empty pages (no answer) | mean results (no answer) |")
        print("|---|---|---|---|")
        for mode, m in results.items():
            r5 = m.recall5[answered].mean()
            empty = bootstrap(m.empty[none_idx])
            returned = m.returned[none_idx].mean()
            print(f"| {mode} | {r5:.3f} | {cell(*empty)} | {returned:.2f} |")


def print_exact(semantic: Metrics | None, reference: Metrics) -> None:
    """Semantic search beside the exact cosine ranking of every current fact."""
    answered = select(reference, None)
    r5, rr = reference.recall5[answered].mean(), reference.rr10[answered].mean()
    line = f"exact cosine of every current fact (no floor, no index): R@5 {r5:.4f}, MRR {rr:.4f}"
    if semantic is not None:
        same = np.mean(semantic.recall5[answered] == reference.recall5[answered])
        line += (
            f"; semantic search R@5 {semantic.recall5[answered].mean():.4f}, MRR "
            f"{semantic.rr10[answered].mean():.4f}, the same recall@5 on {same:.1%} of the "
            f"{len(answered)} answerable questions"
        )
    print("\n" + line)


def write_rankings(
    target: Path, handles: Sequence[Handle], rankings: dict[str, dict[str, list[str]]]
) -> None:
    """Each question, its evidence and each mode's page (with the facts' text), to read."""
    out = []
    for handle in handles:
        text = {f.id: f.content for f in handle.corpus.facts}
        for q in handle.corpus.questions:
            out.append(
                {
                    "id": q.id,
                    "kind": q.kind,
                    "text": q.text,
                    "evidence": [text[r] for r in q.relevant],
                    "found": {
                        mode: [[fid, text.get(fid, fid), fid in q.relevant] for fid in ranked[q.id]]
                        for mode, ranked in rankings.items()
                    },
                }
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"wrote {target}")


def run_shape(
    shape: str, split: str, modes: Sequence[str], model: str, *, beam: Path | None,
    rankings_to: Path | None = None, progress: bool = True, exact: bool = False,
) -> dict[str, Metrics]:  # fmt: skip
    """Build every memory of one shape and split, ask every question in every mode, and
    print the report."""
    corpora = datasets.load(shape, split, beam_path=beam)
    started = time.perf_counter()
    with build_all(corpora, model=model, progress=progress) as handles:
        built = time.perf_counter() - started
        questions = questions_of(handles)
        results: dict[str, Metrics] = {}
        rankings: dict[str, dict[str, list[str]]] = {}
        timings: dict[str, float] = {}
        for mode in modes:
            t0 = time.perf_counter()
            rankings[mode] = rank_with(handles, search_mode(mode))
            timings[mode] = time.perf_counter() - t0
            results[mode] = evaluate(rankings[mode], questions)
        if rankings_to:
            write_rankings(rankings_to, handles, rankings)
        reference = evaluate(rank_with(handles, exact_cosine), questions) if exact else None
    facts = sum(len(h.corpus.facts) for h in handles)
    print(
        f"\n## {shape}, {split}: {len(handles)} memories, {facts} facts, {len(questions)} "
        f"questions; model {model}; limit {LIMIT}, peek"
    )
    print_report(results)
    if reference is not None:
        print_exact(results.get("semantic"), reference)
    print(
        f"\nbuilt in {built:.1f}s; searched in "
        + ", ".join(f"{mode} {t:.1f}s" for mode, t in timings.items())
    )
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "held"), default="dev")
    parser.add_argument("--shape", default=None, help="comma-separated; default: every shape")
    parser.add_argument("--smoke", action="store_true", help="one small memory a shape, seconds")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--model", choices=tuple(MODELS), default=None)
    parser.add_argument("--beam", help="where BEAM was fetched (else EMBORNAL_BEAM)")
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also rank every current fact by its exact cosine (semantic search's reference)",
    )
    parser.add_argument(
        "--rankings",
        type=Path,
        help="write each question with every mode's ranking to this JSON file (dev only)",
    )
    args = parser.parse_args(argv)
    if args.rankings and args.split == "held" and not args.smoke:
        # Reading held rankings is looking at held: it would be tuned on without meaning to.
        parser.error("--rankings is for dev: held is reported, never looked at")
    os.environ.setdefault("OMP_NUM_THREADS", str(machine.threads()))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    beam = datasets.beam_root(args.beam)
    shapes = args.shape.split(",") if args.shape else [
        s for s in datasets.SHAPES if s != "beam" or beam is not None
    ]  # fmt: skip
    split = "smoke" if args.smoke else args.split
    model = args.model or ("fake" if args.smoke else "minilm-l6")
    machine.report_load()
    for shape in shapes:
        target = None
        if args.rankings:
            target = args.rankings.with_name(f"{args.rankings.stem}-{shape}.json")
        run_shape(shape, split, modes, model, beam=beam, rankings_to=target,
                  progress=not args.smoke, exact=args.exact)  # fmt: skip
    if beam is None and not args.shape:
        print("\n(beam: not fetched; give --beam PATH or EMBORNAL_BEAM to include it)")


if __name__ == "__main__":
    main()
