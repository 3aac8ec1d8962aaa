"""Retrieval quality per search mode on generated multi-session conversations.

    python -m bench.quality [--split dev|held] [--long] [--worded] [--smoke]
                            [--modes keyword,semantic,hybrid] [--model minilm-l6|fake]

The data is bench/convgen.py's (see bench/CONVGEN.md): long two-speaker
conversations, one fact per turn, and questions asked later in other words, of four
kinds: single (one turn answers), multi (two or more turns), temporal (when, before,
last month) and none (nothing in the conversation answers); `--long` takes the same
seeds as conversations about twice as long (~640 turns), `--worded` the same
conversations asked in the words that were said (where keyword search is the stronger
half, as it was on the outside benchmark that opened issue 17). `--model fake` is the
lexical test embedder: a model weaker than keyword search, as a small model is on
questions that name their thing. Each conversation gets a
FRESH memory (its own temporary EMBORNAL_HOME): the turns are stored through the store
service with the clock at each turn's time, and each question is asked through
`Memory.search` (peek, limit 10) in every mode.

The tables give recall@5 and recall@10 (the share of a question's evidence turns on
the first 5 / 10 results) and MRR@10 (1 / the position of the first evidence turn, 0
past ten) per mode and kind, each with a 95% bootstrap interval (questions resampled,
1000 times, fixed seed), then hybrid minus each single mode (a paired bootstrap of the
difference). For the no-answer questions: the share whose page came back EMPTY (the
precision on no-answer questions) and the mean number of results.

Tune on dev only; held is reported, never looked at while tuning. To compare other
rankings on dev, reuse the pieces:

    with build_split("dev") as memories:
        rankings = rank_with(memories, lambda memory, question: [...fact ids...])
        print_report({"mine": evaluate(rankings, questions_of(memories))})
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from app.dirs import Dirs
from app.embeddings.base import Embedder
from app.embeddings.fake import FakeEmbedder
from app.embeddings.loader import load_embedder
from app.runtime import Runtime, open_runtime
from app.services import embedding as embedding_service
from app.services import facts as fact_service
from app.services.facts import NewFact
from app.settings import Settings
from app.usecases.memory import Memory, SearchRequest
from bench import convgen, machine

MODELS = {"minilm-l6": 384, "fake": 384}
MODES = ("keyword", "semantic", "hybrid")
ANSWERED = ("single", "multi", "temporal")  # the kinds with evidence, in the tables
LIMIT = 10
RESAMPLES = 1000
BOOTSTRAP_SEED = 17


@dataclass
class Handle:
    """One conversation's memory, ready to be searched."""

    conversation: convgen.Conversation
    runtime: Runtime
    memory: Memory
    ids: dict[str, int]  # generated fact id -> the memory's fact id
    names: dict[int, str]  # and back


class TurnClock:
    """The memory's clock: set to each turn's time before it is stored, so created_at
    is the turn's (session dates and the minutes between turns), then left at the time
    the questions are asked."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def load_model(name: str, home: Path) -> Embedder:
    if name == "fake":
        return FakeEmbedder(MODELS["fake"], name="fake")
    settings = Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": name, "width": MODELS[name], "download": False},
    )
    embedder = load_embedder(settings)
    assert embedder is not None
    return embedder


def build_memory(
    conv: convgen.Conversation, embedder: Embedder, home: Path, *, batch: int = 256
) -> Handle:
    """A fresh memory holding the conversation, one fact per turn at the turn's time."""
    settings = Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": "none", "width": MODELS.get(embedder.name, 384), "download": False},
    )
    runtime = open_runtime(settings)
    runtime.embedder = embedder
    clock = TurnClock()
    memory = Memory(runtime, clock=clock)
    ids: dict[str, int] = {}
    items = conv.facts
    for start in range(0, len(items), batch):
        chunk = items[start : start + batch]
        # The model runs before the write transaction, as Memory.store_batch does it;
        # each turn is then stored at its own time in that one transaction.
        checked = fact_service.validate_new_facts(
            [NewFact(f.path, f.content) for f in chunk], settings.limits
        )
        vectors = embedding_service.embed_for_store(embedder, [c.content for c in checked])
        with memory.transaction(write=True) as (conn, ctx):
            for fact, item, vector in zip(chunk, checked, vectors, strict=True):
                clock.now = datetime.fromisoformat(fact.created_at).timestamp()
                stored = fact_service.store_facts(conn, ctx, [item], vectors=[vector])
                ids[fact.id] = stored[0].id
    clock.now = datetime.fromisoformat(conv.questions[0].asked_at).timestamp()
    return Handle(conv, runtime, memory, ids, {v: k for k, v in ids.items()})


def conversations(
    split: str, *, long: bool = False, worded: bool = False
) -> list[convgen.Conversation]:
    return convgen.split(split, long=long, worded=worded)


@contextmanager
def build_split(
    split: str = "dev",
    *,
    model: str = "minilm-l6",
    progress: bool = False,
    long: bool = False,
    worded: bool = False,
) -> Iterator[list[Handle]]:
    """Every conversation of a split in its own fresh memory (closed at the end)."""
    with tempfile.TemporaryDirectory(prefix="embornal-quality-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        embedder = load_model(model, root / "model")
        handles = []
        for conv in conversations(split, long=long, worded=worded):
            started = time.perf_counter()
            handle = build_memory(conv, embedder, root / conv.id)
            stack.callback(handle.runtime.close)
            handles.append(handle)
            if progress:
                print(
                    f"  {conv.id}: {len(conv.facts)} facts, {len(conv.questions)} "
                    f"questions, stored in {time.perf_counter() - started:.1f}s",
                    flush=True,
                )
        yield handles


def questions_of(handles: Sequence[Handle]) -> list[convgen.Question]:
    return [q for h in handles for q in h.conversation.questions]


RankFn = Callable[[Handle, convgen.Question], list[str]]


def rank_with(handles: Sequence[Handle], fn: RankFn) -> dict[str, list[str]]:
    """The ranking `fn(memory, question)` gives (generated fact ids, best first) for
    every question of the split: the hook to compare other fusions on dev."""
    return {q.id: fn(h, q) for h in handles for q in h.conversation.questions}


def search_mode(mode: str, limit: int = LIMIT) -> RankFn:
    """The service's own ranking: Memory.search in one mode, peeked (no recalls).

    The memory's clock stands at the questions' `asked_at` (build_memory), so a time
    span a question names ("last week") is read from that moment, as a server reads
    it from now."""

    def rank(handle: Handle, question: convgen.Question) -> list[str]:
        page = handle.memory.search(
            "default",
            SearchRequest(q=question.text, mode=mode, limit=limit, peek=True),  # type: ignore[arg-type]
        )
        return [handle.names[r.fact.id] for r in page.results if r.fact.id in handle.names]

    return rank


# --- metrics ---------------------------------------------------------------------------


@dataclass
class Metrics:
    """Per-question figures, aligned with `questions` (answerable ones and no-answer)."""

    questions: list[convgen.Question]
    recall5: np.ndarray
    recall10: np.ndarray
    rr10: np.ndarray
    empty: np.ndarray  # 1.0 when the page was empty (meaningful for kind none)
    returned: np.ndarray  # the number of results


def evaluate(rankings: dict[str, list[str]], questions: Sequence[convgen.Question]) -> Metrics:
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
    """Indexes of the questions of one kind (None: every answerable question)."""
    return np.asarray(
        [i for i, q in enumerate(m.questions) if (q.kind == kind if kind else q.kind in ANSWERED)],
        dtype=int,
    )


METRICS = (("recall5", "R@5"), ("recall10", "R@10"), ("rr10", "MRR@10"))


def cell(mean: float, low: float, high: float, signed: bool = False) -> str:
    fmt = "{:+.3f}" if signed else "{:.3f}"
    return f"{fmt.format(mean)} [{fmt.format(low)}, {fmt.format(high)}]"


def kinds_with_counts(m: Metrics) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for kind in ANSWERED:
        out.append((kind, f"{kind} ({len(select(m, kind))})"))
    out.append((None, f"all ({len(select(m, None))})"))
    return out


def print_report(results: dict[str, Metrics]) -> None:
    first = next(iter(results.values()))
    columns = kinds_with_counts(first)
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
    none_idx = select(first, "none")
    if len(none_idx):
        print(f"\nno-answer questions ({len(none_idx)}): empty page = precision on them\n")
        print("| mode | empty pages | mean results returned |")
        print("|---|---|---|")
        for mode, m in results.items():
            empty = bootstrap(m.empty[none_idx])
            returned = m.returned[none_idx].mean()
            print(f"| {mode} | {cell(*empty)} | {returned:.2f} |")


def write_rankings(
    target: Path, handles: Sequence[Handle], rankings: dict[str, dict[str, list[str]]]
) -> None:
    """Each question, its evidence and each mode's page (with the turns' text), to read."""
    out = []
    for handle in handles:
        text = {f.id: f.content for f in handle.conversation.facts}
        for q in handle.conversation.questions:
            out.append(
                {
                    **asdict(q),
                    "evidence": [text[r] for r in q.relevant],
                    "found": {
                        mode: [[fid, text[fid], fid in q.relevant] for fid in ranked[q.id]]
                        for mode, ranked in rankings.items()
                    },
                }
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"wrote {target}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=tuple(convgen.SPLITS), default="dev")
    parser.add_argument("--long", action="store_true", help="conversations twice as long")
    parser.add_argument("--worded", action="store_true", help="questions in the turns' words")
    parser.add_argument("--smoke", action="store_true", help="one small conversation, seconds")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--model", choices=tuple(MODELS), default=None)
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
    split = "smoke" if args.smoke else args.split
    model = args.model or ("fake" if args.smoke else "minilm-l6")
    machine.report_load()
    started = time.perf_counter()
    with build_split(
        split, model=model, progress=not args.smoke, long=args.long, worded=args.worded
    ) as handles:
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
        if args.rankings:
            write_rankings(args.rankings, handles, rankings)
    facts = sum(len(h.conversation.facts) for h in handles)
    counts = {k: sum(q.kind == k for q in questions) for k in convgen.KINDS}
    label = convgen.label(split, long=args.long, worded=args.worded)
    print(
        f"\nsplit {label}: {len(handles)} conversations, {facts} facts, {len(questions)} "
        f"questions {counts}; model {model}; limit {LIMIT}, peek"
    )
    print_report(results)
    print(
        f"\nbuilt in {built:.1f}s; searched in "
        + ", ".join(f"{mode} {t:.1f}s" for mode, t in timings.items())
    )


if __name__ == "__main__":
    main()
