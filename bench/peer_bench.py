"""Embornal against the peer (mcp-memory-service-lite), verb by verb, in one interleaved run.

    make bench-peer [PEER_ARGS="--threads 1"]         # makes the peer's venv, .venv-peer/
    python -m bench.peer_bench [--facts 2000] [--queries 40] [--stores 40] [--threads N]
    python -m bench.peer_bench --peer-tokenizer shipped   # the peer's tokenizer as it comes
    python -m bench.peer_bench --smoke                # seconds, no peer: what `make test` runs

Both hold the same --facts facts (bench/search_bench.py's generator: standard-library
comments, the first --unique of them alone, the rest joined in pairs) and answer the
same requests, one of ours then one of the peer's (the order flips every request), so
the machine's noise falls on both alike. Ours run in this process through the use
cases the routes call (app.usecases.memory.Memory, subject `default`, SQLite). The
peer runs in its own process and virtualenv (bench/peer_runner.py, JSON lines over
a pipe) through SqliteVecMemoryStorage, the storage its MCP tools and HTTP API call,
with its defaults (semantic dedup on store, weighted BM25 + vector hybrid); its time
is taken inside its process around the call (no pipe, no JSON), and the time seen
from here (the pipe included) is printed beside it.

The same model: embornal's all-MiniLM-L6-v2 int8 ONNX file, which the peer finds at
its own model path because its $HOME is pointed at a directory that links to it (no
download: MCP_MEMORY_ONNX_ALLOW_DOWNLOAD=0, HF_HUB_OFFLINE=1). Its tokenizer file is
the one embornal ships, configured as embornal uses it (truncation at 256, no fixed
padding), unless --peer-tokenizer shipped: then as the file comes, padded to 128
tokens, which is what the peer does with its own download. Both sides run the model
on the same ONNX threads: onnxruntime's own count by default (embornal's
embedding.threads 0; the peer sets none), or --threads N on both (the runner hands
the peer's sessions the option its code never sets); OpenMP/BLAS pinned as
bench/__init__.py pins them. The bench checks that both sides' vectors agree (cosine).

Verbs, ours and the peer's:
store      Memory.store (embed, `similar`, one write)     store() (embed, dedup, insert, conflicts)
semantic   search mode semantic, limit 10                 search_memories(mode="semantic")
hybrid     search mode hybrid                             search_memories(mode="hybrid")
keyword    search mode keyword (BM25, a query's first     search_memories(mode="exact") (its
           three words)                                   keyword mode: LIKE over content)
keyword/bm25  the same                                    _search_bm25 (its hybrid's keyword half)
get        Memory.get (a recall, as GET /v1/facts/{id})    get_by_hash
list       Memory.list_facts, 10                          get_all_memories(limit=10)
delete     Memory.delete                                  delete(hash)
Each query is new to both processes the first time (neither's embedding cache holds
it); "again" rows ask the same queries once more.

Prints the ratio ours/peer per verb against issue 33's goal (at most 0.25), then where
our time goes per verb (bench.stages.Timers, wrapping the functions by name as
bench/search_profile.py does: embed, the store's model check, `similar`, access rules,
keyword and semantic ranking, score, hydrate, rows written, the vector index written
and caught up, activity, commit) and where
the peer's goes (its model, its dedup, its vector and BM25 halves).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection

from app.db.engine import write_transaction
from app.dirs import Dirs
from app.embeddings.catalog import get_spec
from app.embeddings.fetch import ensure_model_files
from app.embeddings.loader import load_embedder
from app.runtime import Runtime, open_runtime
from app.services import activity as activity_service
from app.services import facts as fact_service
from app.services import search as search_service
from app.services import vector_index as vector_service
from app.settings import Settings
from app.usecases import memory as memory_module
from app.usecases.memory import Memory, NewFact, SearchRequest
from bench import machine, search_bench, search_profile
from bench.corpus import sentences
from bench.search_bench import BATCH, MODEL, WIDTH, pct
from bench.stages import Timers

ROOT = Path(__file__).resolve().parents[1]
PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
PEER_PACKAGE = "mcp-memory-service-lite==12.4.0"
SUBJECT = "default"
GOAL = 0.25  # issue 33: every verb at most a quarter of the peer's time
LIMIT = 10
# The peer's model path under $HOME (mcp_memory_service/embeddings/onnx_embeddings.py).
PEER_MODEL_DIR = Path(".cache/mcp_memory/onnx_models/all-MiniLM-L6-v2/onnx")

# (verb, what the peer runs for it); the ratio of each is held to GOAL.
VERBS = (
    ("store", "store(): embed, dedup, insert, conflicts"),
    ("semantic", 'search_memories(mode="semantic")'),
    ("semantic, again", "the same queries again (cached)"),
    ("hybrid", 'search_memories(mode="hybrid")'),
    ("hybrid, again", "the same queries again (cached)"),
    ("keyword", 'search_memories(mode="exact"): LIKE'),
    ("keyword / bm25", "_search_bm25: its hybrid's BM25 half"),
    ("get", "get_by_hash"),
    ("list", "get_all_memories(limit=10)"),
    ("delete", "delete(hash)"),
)
# Where our time goes: each stage's own time (a wrapped callee's time is its own
# stage's, not its caller's), in this order; "other" is the rest of the request.
OUR_STAGES = (
    ("embed", "embed"),
    ("model check (a read)", "model check"),
    ("similar", "similar"),
    ("access rules", "access rules"),
    ("rank keyword", "rank keyword"),
    ("rank semantic", "rank semantic"),
    ("rank (own)", "rank"),
    ("score (hybrid)", "hybrid"),
    ("hydrate", "hydrate"),
    ("recall writes", "recall"),
    ("rows: store", "store rows"),
    ("rows: get/list/delete, paths", "rows"),  # store: the paths of its `similar`
    ("vector index: write", "vector index"),
    ("vector index: catch up", "index refresh"),
    ("activity", "activity"),
    ("commit", "commit"),
)
PEER_STAGES = ("embed", "dedup", "vector", "bm25", "conflicts")


@dataclass
class Timed:
    seconds: float
    stages: dict[str, float]
    wall: float | None = None  # seen from outside the process (the peer's: pipe included)
    result: Any = None


@dataclass
class Verb:
    ours: list[Timed] = field(default_factory=list)
    peer: list[Timed] = field(default_factory=list)


class PeerError(RuntimeError):
    pass


class PeerProcess:
    """bench/peer_runner.py in its own process, one JSON line each way per request."""

    def __init__(self, python: Path, db: Path, home: Path, *, fake: bool, threads: int) -> None:
        env = dict(os.environ)
        env.update(
            {
                "HOME": str(home),  # its model path, its config and logs: all under here
                "MCP_MEMORY_STORAGE_BACKEND": "sqlite_vec",
                "MCP_MEMORY_SQLITE_PATH": str(db),
                "MCP_MEMORY_ONNX_ALLOW_DOWNLOAD": "0",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
            }
        )
        self.log = home / "peer-stderr.log"
        command = [str(python), "-m", "bench.peer_runner", "--threads", str(threads), str(db)]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [*command, "--fake"] if fake else command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.ready = self._answer()

    def _answer(self) -> Timed:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise PeerError(f"the peer runner ended: {self.tail()}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise PeerError(f"the peer failed: {answer['error']}")
        return Timed(answer["seconds"], answer["stages"], result=answer["result"])

    def ask(self, op: str, **request: Any) -> Timed:
        assert self.proc.stdin is not None
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        answer.wall = time.perf_counter() - t0
        return answer

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def peer_home(root: Path, model_dir: Path, tokenizer: str) -> Path:
    """A $HOME where the peer finds embornal's model at its own path."""
    home = root / "peer-home"
    target = home / PEER_MODEL_DIR
    target.mkdir(parents=True)
    (target / "model.onnx").symlink_to((model_dir / "model.onnx").resolve())
    spec = json.loads((model_dir / "tokenizer.json").read_text())
    if tokenizer == "ours":
        # As app/embeddings/onnx_embedder.py configures the same file: the model's 256
        # tokens, each batch padded to its longest text only (the peer pads to the
        # batch's longest itself).
        spec["truncation"] = {
            **(spec.get("truncation") or {}),
            "max_length": get_spec(MODEL).max_tokens,
        }
        spec["padding"] = None
    (target / "tokenizer.json").write_text(json.dumps(spec))
    return home


class Ours:
    """Our verbs through the use cases, each timed whole and stage by stage."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.timers = Timers(exclusive=True)
        t = self.timers
        search_profile.watch_search(t)  # embed, rank, score, hydrate, recall ...
        t.wrap(memory_module, "embed_for_store", "embed")
        t.wrap(Memory, "_similar_batch", "similar")
        t.wrap(search_service, "still_visible", "similar")
        t.wrap(Memory, "context", "access rules")
        t.wrap(fact_service, "store_facts", "store rows")
        t.wrap(fact_service, "write_vectors", "vector index")
        t.wrap(vector_service, "write_codes", "vector index")
        # The in-process index reading the codes written since it last looked (the
        # store before this one): taken out of `similar` and of the semantic ranking.
        t.wrap(vector_service.VectorIndex, "refresh", "index refresh")
        t.wrap(Memory, "_record_stores", "activity")
        t.wrap(activity_service, "record", "activity")
        for name in ("get_fact", "list_facts", "delete_fact", "similar_paths"):
            t.wrap(fact_service, name, "rows")
        t.wrap(Connection, "_commit_impl", "commit")
        t.wrap(Runtime, "follow_model", "model check")

    def timed(self, call: Callable[[], Any]) -> Timed:
        self.timers.take()
        t0 = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - t0
        return Timed(seconds, self.timers.take(), seconds, result)

    def close(self) -> None:
        self.timers.restore()


def interleaved(
    n: int, verb: Verb, ours: Callable[[int], Timed], peer: Callable[[int], Timed]
) -> None:
    """Request i of each side, ours first on even i and the peer's first on odd."""
    for i in range(n):
        order = (("ours", ours), ("peer", peer)) if i % 2 == 0 else (("peer", peer), ("ours", ours))
        for side, run in order:
            getattr(verb, side).append(run(i))


def preload(
    memory: Memory, peer: PeerProcess, facts: int, unique: list[str], vectors: np.ndarray
) -> dict[str, float]:
    """The same `facts` texts into both: ours with the generator's vectors (the same model's),
    the peer through its batch store, which embeds them itself."""
    spent = {"ours": 0.0, "peer": 0.0}
    for start in range(0, facts, BATCH):
        texts, vecs = search_bench.generated(start, min(start + BATCH, facts), unique, vectors)
        items = [NewFact(f"/bench/d{(start + k) % 20}", text) for k, text in enumerate(texts)]
        blobs = [v.astype("<f4").tobytes() for v in vecs]
        t0 = time.perf_counter()
        with memory.transaction(SUBJECT, write=True) as (conn, ctx):
            fact_service.store_facts(conn, ctx, items, vectors=blobs)
        spent["ours"] += time.perf_counter() - t0
        for at in range(0, len(texts), 250):
            spent["peer"] += peer.ask("preload", contents=texts[at : at + 250]).seconds
    with write_transaction(memory.runtime.engine) as conn:
        vector_service.repartition_if_stale(conn)  # what the next start would do
    memory.runtime.load_vector_index()
    return spent


def same_model(embedder: Any, peer: PeerProcess, texts: list[str]) -> float:
    """The lowest cosine between the two sides' vectors of the same texts."""
    ours = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    theirs = np.asarray([peer.ask("embed", text=text).result["vector"] for text in texts])
    if theirs.shape != ours.shape:
        return float("nan")
    return float(np.min(np.sum(ours * theirs, axis=1)))


def model_settings(root: Path) -> Settings:
    """Settings that find embornal's model files under `root` (fetched there if needed)."""
    return Settings(
        dirs=Dirs(root, root, root), embedding={"model": MODEL, "width": WIDTH, "download": False}
    )


def model_files(weights: Settings) -> Path:
    """The directory of embornal's model files, which the peer is pointed at (peer_home)."""
    return ensure_model_files(get_spec(MODEL), weights, progress=False, download=False)


def add_peer_options(parser: argparse.ArgumentParser, *, tokenizer: str) -> None:
    """--peer-python and --peer-tokenizer (default `tokenizer`), for the benches that run
    the peer."""
    parser.add_argument("--peer-python", type=Path, default=PEER_PYTHON)
    parser.add_argument(
        "--peer-tokenizer",
        choices=["ours", "shipped"],
        default=tokenizer,
        help="the tokenizer file as embornal configures it, or as it comes (padded to 128, "
        "as the peer uses its own download)",
    )


def run(args: argparse.Namespace, root: Path) -> tuple[dict[str, Verb], dict[str, Any]]:
    embedder, _, unique, vectors = search_bench.model_and_corpus(root, args.unique, args.queries)
    everything = sentences(args.unique + args.queries + args.stores)
    queries = everything[args.unique : args.unique + args.queries]
    new_texts = everything[args.unique + args.queries :]
    weights = model_settings(root)
    model_dir = model_files(weights)
    if args.threads:  # the model as embedding.threads N runs it
        pinned = weights.embedding.model_copy(update={"threads": args.threads})
        embedder = load_embedder(weights.model_copy(update={"embedding": pinned}))
    home = root / "ours"
    home.mkdir()
    rt = open_runtime(search_bench.settings_for(home))
    rt.embedder = embedder
    memory = Memory(rt)
    python = Path(sys.executable) if args.fake_peer else args.peer_python
    if not python.exists():
        sys.exit(f"no peer at {python}: run `make bench-peer` (or pass --peer-python)")
    peer = PeerProcess(
        python,
        root / "peer.db",
        peer_home(root, model_dir, args.peer_tokenizer),
        fake=args.fake_peer,
        threads=args.threads,
    )
    ours = Ours(memory)
    info: dict[str, Any] = {"peer": peer.ready.result, "peer_open_s": peer.ready.seconds}
    try:
        info["preload_s"] = preload(memory, peer, args.facts, unique, vectors)
        info["peer_count"] = peer.ask("count").result["count"]
        info["cosine"] = same_model(embedder, peer, queries[:5])
        # Warm both: the first request of a process pays its setup.
        memory.search(SUBJECT, SearchRequest(q="warm up the model", mode="hybrid", limit=LIMIT))
        peer.ask("search", query="warm up the model", mode="hybrid", limit=LIMIT)
        verbs = {name: Verb() for name, _ in VERBS}
        stored_ids: list[int] = []
        stored_hashes: list[str] = []

        def our_store(i: int) -> Timed:
            done = ours.timed(lambda: memory.store(SUBJECT, NewFact("/bench/new", new_texts[i])))
            assert done.result.similar_checked  # `similar` ran: the store keeps it
            stored_ids.append(done.result.id)
            done.result = bool(done.result.similar)
            return done

        def peer_store(i: int) -> Timed:
            done = peer.ask("store", content=new_texts[i])
            if done.result["stored"]:
                stored_hashes.append(done.result["hash"])
            return done

        interleaved(args.stores, verbs["store"], our_store, peer_store)
        for mode in ("semantic", "hybrid", "keyword"):
            asked = [search_profile.asked(q, mode) for q in queries]
            peer_mode = "exact" if mode == "keyword" else mode
            for name in (mode, f"{mode}, again") if mode != "keyword" else (mode,):

                def our_search(i: int, mode: str = mode, asked: list[str] = asked) -> Timed:
                    request = SearchRequest(q=asked[i], mode=mode, limit=LIMIT)
                    return ours.timed(lambda: memory.search(SUBJECT, request))

                def peer_search(i: int, pm: str = peer_mode, asked: list[str] = asked) -> Timed:
                    return peer.ask("search", query=asked[i], mode=pm, limit=LIMIT)

                interleaved(len(asked), verbs[name], our_search, peer_search)
        asked = [search_profile.asked(q, "keyword") for q in queries]
        interleaved(
            len(asked),
            verbs["keyword / bm25"],
            lambda i: ours.timed(
                lambda: memory.search(
                    SUBJECT, SearchRequest(q=asked[i], mode="keyword", limit=LIMIT)
                )
            ),
            lambda i: peer.ask("bm25", query=asked[i], limit=LIMIT),
        )
        n = min(len(stored_ids), len(stored_hashes))
        interleaved(
            n,
            verbs["get"],
            lambda i: ours.timed(lambda: memory.get(SUBJECT, stored_ids[i])),
            lambda i: peer.ask("get", hash=stored_hashes[i]),
        )
        interleaved(
            n,
            verbs["list"],
            lambda i: ours.timed(lambda: memory.list_facts(SUBJECT, limit=LIMIT)),
            lambda i: peer.ask("list", limit=LIMIT),
        )
        interleaved(
            n,
            verbs["delete"],
            lambda i: ours.timed(lambda: memory.delete(SUBJECT, stored_ids[i])),
            lambda i: peer.ask("delete", hash=stored_hashes[i]),
        )
        info["similar_found"] = sum(1 for t in verbs["store"].ours if t.result)
        info["peer_refused"] = sum(1 for t in verbs["store"].peer if not t.result["stored"])
        info["peer_deleted"] = sum(1 for t in verbs["delete"].peer if t.result["deleted"])
        return verbs, info
    except PeerError as exc:
        sys.exit(f"{exc}\n{peer.tail()}")
    finally:
        ours.close()
        peer.close()
        rt.close()


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def print_tables(args: argparse.Namespace, verbs: dict[str, Verb], info: dict[str, Any]) -> None:
    peer = info["peer"]
    cosine = "n/a (the stand-in)" if np.isnan(info["cosine"]) else f"{info['cosine']:.4f}"
    print(
        f"\nembornal (SQLite, in-process use cases) against {peer['package']} {peer['version']} "
        f"(sqlite_vec storage, SQLite {peer.get('sqlite', '?')}, onnxruntime "
        f"{peer.get('onnxruntime', '?')}), {args.facts} facts preloaded in both "
        f"(the peer holds {info['peer_count']}), model {MODEL} "
        f"(int8 ONNX, the same file; the peer's tokenizer: {args.peer_tokenizer}; lowest cosine "
        f"between the two sides' vectors {cosine}), limit {LIMIT}; ms\n"
    )
    print(
        "| verb | ours p50 | ours p90 | peer p50 | peer p90 | peer p50 seen outside "
        f"| ours/peer | goal ≤ {GOAL} | n | the peer's call |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, theirs in VERBS:
        verb = verbs[name]
        if not verb.ours or not verb.peer:
            continue
        mine = [t.seconds for t in verb.ours]
        peers = [t.seconds for t in verb.peer]
        outside = [t.wall or t.seconds for t in verb.peer]
        ratio = p50(mine) / p50(peers) if p50(peers) > 0 else float("inf")
        print(
            f"| {name} | {p50(mine):.2f} | {pct(mine, 0.9):.2f} | {p50(peers):.2f} "
            f"| {pct(peers, 0.9):.2f} | {p50(outside):.2f} | {ratio:.2f} "
            f"| {'met' if ratio <= GOAL else 'NOT met'} | {len(mine)} | {theirs} |"
        )
    print(
        f"\nstores: ours named `similar` facts on {info['similar_found']} of {args.stores}; "
        f"the peer refused {info['peer_refused']} as near duplicates (its dedup: cosine ≥ 0.85 "
        "within 24 h), "
        f"deleted {info['peer_deleted']}. Preload: ours {info['preload_s']['ours']:.1f} s (vectors "
        f"given), the peer {info['preload_s']['peer']:.1f} s (it embeds); the peer opened in "
        f"{info['peer_open_s']:.2f} s."
    )
    names = [name for name, _ in VERBS if verbs[name].ours]
    print("\nwhere our time goes (p50 of each stage's own time per request, ms)\n")
    print("| stage | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, stage in OUR_STAGES:
        cells = [p50([t.stages.get(stage, 0.0) for t in verbs[name].ours]) for name in names]
        if any(c > 0.0005 for c in cells):
            print(f"| {label} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    stages = {stage for _, stage in OUR_STAGES}
    other = [
        p50(
            [
                t.seconds - sum(v for k, v in t.stages.items() if k in stages)
                for t in verbs[name].ours
            ]
        )
        for name in names
    ]
    print("| other (the rest) | " + " | ".join(f"{c:.2f}" for c in other) + " |")
    totals = [p50([t.seconds for t in verbs[name].ours]) for name in names]
    print("| total | " + " | ".join(f"{c:.2f}" for c in totals) + " |")
    print("\nwhere the peer's time goes (p50 per request, ms; embed is inside dedup and vector)\n")
    print("| stage | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for stage in PEER_STAGES:
        cells = [p50([t.stages.get(stage, 0.0) for t in verbs[name].peer]) for name in names]
        if any(c > 0.0005 for c in cells):
            print(f"| {stage} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    less = [
        p50([t.seconds - t.stages.get("embed", 0.0) for t in verbs[name].peer]) for name in names
    ]
    print("| total less embed | " + " | ".join(f"{c:.2f}" for c in less) + " |")
    totals = [p50([t.seconds for t in verbs[name].peer]) for name in names]
    print("| total | " + " | ".join(f"{c:.2f}" for c in totals) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=2000, help="preloaded in both")
    parser.add_argument("--unique", type=int, default=1000, help="sentences embedded for real")
    parser.add_argument("--queries", type=int, default=40, help="per search verb")
    parser.add_argument("--stores", type=int, default=40, help="stores (then gets, lists, deletes)")
    add_peer_options(parser, tokenizer="ours")
    parser.add_argument(
        "--threads", type=int, default=0, help="ONNX threads on both sides; 0: onnxruntime's"
    )
    parser.add_argument(
        "--fake-peer", action="store_true", help="the stand-in (bench/peer_fake.py)"
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny run with the stand-in")
    args = parser.parse_args(argv)
    if args.smoke:
        args.facts, args.unique, args.queries, args.stores, args.fake_peer = 300, 120, 4, 4, True
    onnx_threads = (
        f"{args.threads} on both sides (embornal embedding.threads {args.threads}; the peer's "
        "sessions given the same by its runner)"
        if args.threads
        else "onnxruntime's choice on both sides (embornal embedding.threads 0; the peer sets none)"
    )
    machine.report_load(onnx_threads)
    with tempfile.TemporaryDirectory() as tmp:
        verbs, info = run(args, Path(tmp))
    print_tables(args, verbs, info)
    machine.report_load(onnx_threads)


if __name__ == "__main__":
    main()
