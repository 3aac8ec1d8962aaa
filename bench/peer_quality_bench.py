"""The peer's plain semantic search on the notes memories, beside ours.

    make bench-peer                                   # once: the peer's venv, .venv-peer/
    python -m bench.peer_quality_bench [--split dev,held] [--peer-tokenizer shipped]
    python -m bench.peer_quality_bench --smoke        # seconds: the stand-in peer, as `make test`

Checked from outside, a peer's semantic search (mcp-memory-service-lite, the same model
file) found more than ours on a notes set (issue 29: recall@5 0.940 against 0.883). This
asks the same of both on the notes memories of bench/notes/ (bench/datasets.py).

Each memory is built for ours as `bench.quality` builds it (every fact at its time, its
supersedes and deletes made). The peer has neither supersedes nor deletes: it is given the
facts current at the end, each with one store call (its semantic dedup may refuse one;
the count is printed), and answers each question with search_memories(mode="semantic",
limit 10). Ours answers with Memory.search (semantic, its floor); beside both, the exact
cosine of every current fact with no floor and no index (bench.quality.exact_cosine).
Prints recall@5, MRR@10 and recall@1 over the answerable questions, and the share of the
no-answer questions answered with an empty page.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench import datasets, machine, quality
from bench.peer_bench import (
    PeerProcess,
    add_peer_options,
    model_files,
    model_settings,
    peer_home,
)
from bench.search_bench import MODEL

LIMIT = 10
Starter = Callable[[Path], PeerProcess]


def peer_rankings(
    handles: list[quality.Handle], start: Starter, root: Path
) -> tuple[dict[str, list[str]], int, int]:
    """The peer's semantic page of every question (the data's fact ids), each memory in a
    peer of its own; with how many stores it was asked and how many it refused."""
    rankings: dict[str, list[str]] = {}
    asked = refused = 0
    for number, handle in enumerate(handles):
        corpus = handle.corpus
        gone = {f.supersedes for f in corpus.facts if f.supersedes}
        gone |= {f.id for f in corpus.facts if f.deleted_at}
        folder = root / f"peer-{number}"
        folder.mkdir()
        peer = start(folder)
        try:
            by_hash: dict[str, str] = {}
            for fact in corpus.facts:
                if fact.id in gone:
                    continue
                answer = peer.ask("store", content=fact.content).result
                asked += 1
                refused += not answer["stored"]
                by_hash[answer["hash"]] = fact.id
            for question in corpus.questions:
                found = peer.ask("search", query=question.text, mode="semantic", limit=LIMIT)
                rankings[question.id] = [by_hash.get(h, "?") for h in found.result["hashes"]]
        finally:
            peer.close()
    return rankings, asked, refused


def row(name: str, m: quality.Metrics) -> str:
    answered = quality.select(m, None)
    none = quality.select(m, "-")
    empty = f"{m.empty[none].mean():.3f}" if len(none) else "-"
    r5, rr = m.recall5[answered].mean(), m.rr10[answered].mean()
    r1 = float(np.mean(m.rr10[answered] == 1.0))
    return f"| {name} | {r5:.4f} | {rr:.4f} | {r1:.4f} | {empty} |"


def peer_starter(root: Path, python: Path, tokenizer: str, *, smoke: bool) -> Starter:
    """How to start a peer in a folder of its own: the stand-in, or the peer on this
    checkout's model file (its $HOME pointing at it, bench.peer_bench.peer_home)."""
    if smoke:
        home = root / "peer-home"
        home.mkdir()
        return lambda folder: PeerProcess(python, folder / "peer.db", home, fake=True, threads=0)
    files = model_files(model_settings(root))
    return lambda folder: PeerProcess(
        python, folder / "peer.db", peer_home(folder, files, tokenizer), fake=False, threads=0
    )


def run_split(split: str, python: Path, tokenizer: str, *, smoke: bool) -> None:
    """Every notes memory of `split` in both, every question asked of both: the table."""
    corpora = datasets.load("notes", split)
    model = "fake" if smoke else MODEL
    with tempfile.TemporaryDirectory() as tmp, quality.build_all(corpora, model=model) as handles:
        root = Path(tmp)
        start = peer_starter(root, python, tokenizer, smoke=smoke)
        peer, asked, refused = peer_rankings(handles, start, root)
        ours = quality.rank_with(handles, quality.search_mode("semantic"))
        exact = quality.rank_with(handles, quality.exact_cosine)
        questions = quality.questions_of(handles)
    facts = sum(len(c.facts) for c in corpora)
    print(
        f"\nnotes, {split}: {len(corpora)} memories, {facts} facts, {len(questions)} "
        f"questions; limit {LIMIT}; the peer's tokenizer: {tokenizer}\n"
    )
    print("| semantic search | R@5 | MRR@10 | R@1 | empty pages (no answer) |")
    print("|---|---|---|---|---|")
    for name, rankings in (("the peer", peer), ("ours", ours), ("exact cosine, no floor", exact)):
        print(row(name, quality.evaluate(rankings, questions)))
    print(f"\nthe peer refused {refused} of {asked} stores (its semantic dedup)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev,held", help="comma-separated: dev, held")
    # The peer as it runs with its own download, as the outside check ran it.
    add_peer_options(parser, tokenizer="shipped")
    parser.add_argument("--smoke", action="store_true", help="the stand-in peer, the smoke notes")
    args = parser.parse_args(argv)
    machine.report_load()
    splits = ["smoke"] if args.smoke else [s.strip() for s in args.split.split(",") if s.strip()]
    python = Path(sys.executable) if args.smoke else args.peer_python
    if not python.exists():
        sys.exit(f"no peer at {python}: run `make bench-peer` (or pass --peer-python)")
    for split in splits:
        run_split(split, python, args.peer_tokenizer, smoke=args.smoke)
    machine.report_load()


if __name__ == "__main__":
    main()
