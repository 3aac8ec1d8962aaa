"""Batch ingest with the real model over HTTP, against the model alone on the same texts.

    python -m bench.ingest_bench                          # 20,000 facts, SQLite and PostgreSQL
    python -m bench.ingest_bench --backend sqlite --facts 5000
    python -m bench.ingest_bench --against before=/tmp/prev   # that checkout's servers too
    python -m bench.ingest_bench --smoke                  # seconds: what `make test` runs

The facts are short sentences (bench.corpus: the standard library's comments, 53
characters on average), each stored once by every server into its own new memory
(POST /v1/facts/batch, --request facts a call) as an agent with a token, and embedded
once by the model alone in this process (minilm-l6, batches of --model-batch, the
threads onnxruntime chooses, as a server's model runs). The servers are `embornal
serve` with minilm-l6 and their default settings, started side by side: each request
of facts goes to every server and to the model alone in turn, the order rotating from
one to the next, so a busy moment of the shared machine falls on every one alike.

Then where a batch's time goes: --breakdown more facts stored in each memory of this
checkout in this process (Memory.store_batch, the code the route runs), with the
phases timed: the model, the `similar` search, the write transaction's parts and its
commit. Prints facts/s of the model alone and of each server, their ratios, the
bounds of issue 33 (HTTP >= 0.6 of the model alone on SQLite; PostgreSQL >= 0.8 of
SQLite), and the breakdown in ms a fact.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.embeddings.loader import load_embedder
from app.runtime import open_runtime
from app.settings import Settings
from app.usecases.memory import Memory, NewFact
from bench import machine
from bench.corpus import sentences
from bench.databases import Databases
from bench.search_bench import MODEL, settings_for
from bench.stages import Timers
from tests.ops.live import ROOT, LiveServer

SUBJECT = "agent"
# The agent writes and reads its own subtree and reads a shared one: its `similar`
# search runs under rules, as an agent's does, not as the owner's.
POLICIES = (
    f"p, {SUBJECT}, path:/agents/{SUBJECT}/*, write, allow",
    f"p, {SUBJECT}, path:/agents/{SUBJECT}/*, read, allow",
    f"p, {SUBJECT}, path:/shared/*, read, allow",
)
TOPICS = 20  # an agent's session writes under a few paths, not one per fact
SIMILAR_SHARE = 0.02  # every fiftieth fact repeats an earlier one: `similar` has hits


def facts_text(count: int, offset: int = 0) -> list[str]:
    """`count` distinct short facts, the same every run; past the corpus, two joined."""
    corpus = sentences(40_000)
    out = []
    for k in range(offset, offset + count):
        if k < len(corpus):
            out.append(corpus[k])
        else:
            out.append(f"{corpus[k % len(corpus)]} {corpus[(7 * k + 3) % len(corpus)]}")
    return out


def payload(texts: list[str], start: int) -> list[dict[str, str]]:
    """The facts of one request: texts start..; some repeat an earlier text."""
    items = []
    for k, text in enumerate(texts, start):
        if k > 0 and k % round(1 / SIMILAR_SHARE) == 0:
            text = f"{texts[0]} again"  # near the request's first fact: a `similar` hit
        items.append({"path": f"/agents/{SUBJECT}/t{(k // 50) % TOPICS}", "content": text})
    return items


def with_embedding(settings: Settings, batch: int | None = None) -> Settings:
    """`settings` with the model's threads as a server has them (onnxruntime's choice)
    and, if given, its batches of `batch` texts."""
    update: dict[str, int] = {"threads": 0}
    if batch is not None:
        update["batch_size"] = batch
    return settings.model_copy(update={"embedding": settings.embedding.model_copy(update=update)})


# --- the servers --------------------------------------------------------------------


@dataclass
class Server:
    """One checkout's `embornal serve` on a new memory of one backend."""

    label: str
    backend: str
    root: Path
    home: Path
    env: dict[str, str]
    live: LiveServer | None = None
    client: httpx.Client | None = None
    seconds: float = 0.0
    stored: int = 0
    with_similar: int = 0

    @property
    def name(self) -> str:
        return f"{self.label} {self.backend}"

    def start(self) -> None:
        self.live = LiveServer(self.home, MODEL, self.env, root=self.root).start(ready_timeout=600)
        # The agent's rules and token through the owner's API: a command line process
        # each would cost a second apiece (most of a smoke run).
        with httpx.Client(base_url=self.live.base_url, headers=self.live.headers) as owner:
            for line in POLICIES:
                owner.post("/v1/policies", json={"line": line}).raise_for_status()
            issued = owner.post("/v1/tokens", json={"subject": SUBJECT})
            issued.raise_for_status()
        self.client = httpx.Client(
            base_url=self.live.base_url,
            headers={"Authorization": f"Bearer {issued.json()['token']}"},
            timeout=600,
        )

    def store(self, items: list[dict[str, str]]) -> None:
        assert self.client is not None
        started = time.perf_counter()
        response = self.client.post("/v1/facts/batch", json={"facts": items})
        self.seconds += time.perf_counter() - started
        if response.status_code != 201:
            raise SystemExit(f"{self.name}: HTTP {response.status_code}: {response.text[:500]}")
        stored = response.json()["facts"]
        if len(stored) != len(items) or not all(f["similar_checked"] for f in stored):
            raise SystemExit(f"{self.name}: a fact came back without its `similar` search")
        self.stored += len(stored)
        self.with_similar += sum(1 for f in stored if f["similar"])

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.live is not None:
            self.live.stop()


class ModelAlone:
    """The model in this process, as a server loads it, on batches of `batch` texts."""

    def __init__(self, weights: Path, batch: int) -> None:
        # onnxruntime's choice of threads: what a server runs with.
        self.embedder = load_embedder(with_embedding(settings_for(weights, MODEL), batch))
        self.name = f"model alone (batches of {batch})"
        self.seconds = 0.0
        self.stored = 0

    def store(self, items: list[dict[str, str]]) -> None:
        started = time.perf_counter()
        assert self.embedder is not None
        self.embedder.embed_documents([item["content"] for item in items])
        self.seconds += time.perf_counter() - started
        self.stored += len(items)


def side_by_side(runners: list[Any], texts: list[str], request: int) -> None:
    """Each request's facts to every runner in turn, the order rotating."""
    for number, start in enumerate(range(0, len(texts), request)):
        items = payload(texts[start : start + request], start)
        for turn in range(len(runners)):
            runners[(number + turn) % len(runners)].store(items)


# --- where the time goes ------------------------------------------------------------


# (module, class or "", attribute, label): what a store calls, timed where the names
# exist (another checkout's code may lack some). Indented labels are parts of the row
# above them (`store rows` holds the write checks, the paths, the vectors and the read
# back; the rest of it is the rows of facts and tags).
TIMED = (
    ("app.usecases.memory", "", "embed_for_store", "model"),
    ("app.usecases.memory", "Memory", "_similar", "similar"),
    ("app.usecases.memory", "Memory", "_similar_batch", "similar"),
    ("app.services.search", "", "still_visible", "similar still visible"),
    ("app.usecases.memory", "Memory", "_keep_tags", "tags kept on supersede"),
    ("app.services.facts", "", "store_facts", "store rows"),
    ("app.services.facts", "", "may_store", "  write rule checks"),
    ("app.services.facts", "", "may_store_all", "  write rule checks"),
    ("app.services.paths", "", "ensure_path", "  paths"),
    ("app.services.paths", "", "ensure_paths", "  paths"),
    ("app.services.facts", "", "write_vectors", "  vectors and index codes"),
    ("app.services.vector_index", "", "write_codes", "  vector index writes"),  # PG: HNSW
    ("app.services.facts", "", "hydrate", "  read back"),
    ("app.usecases.memory", "Memory", "_record_stores", "activity"),
)


@contextmanager
def timing(timers: Timers) -> Iterator[None]:
    """The TIMED functions (inclusive: a part counts in its row too) and the write
    transaction's commit timed into `timers`."""
    for module, cls, name, label in TIMED:
        owner: Any = importlib.import_module(module)
        if cls:
            owner = getattr(owner, cls)
        if name in vars(owner):
            timers.wrap(owner, name, label)
    timers.wrap_exit(importlib.import_module("app.usecases.memory"), "write_transaction", "commit")
    try:
        yield
    finally:
        timers.restore()


def breakdown(
    server: Server, model: ModelAlone, texts: list[str], request: int
) -> dict[str, float]:
    """Store `texts` into `server`'s memory in this process, the phases timed."""
    env = server.env
    url = env.get("EMBORNAL_DATABASE__URL")
    rt = open_runtime(with_embedding(settings_for(server.home, MODEL, url)))
    rt.embedder = model.embedder  # the model loaded once, in this process
    memory = Memory(rt, via="api")
    timers = Timers()
    try:
        with timing(timers):
            started = time.perf_counter()
            for start in range(0, len(texts), request):
                items = [
                    NewFact(item["path"], item["content"])
                    for item in payload(texts[start : start + request], start)
                ]
                memory.store_batch(SUBJECT, items)
            total = time.perf_counter() - started
    finally:
        rt.close()
    return {**timers.take(), "total": total}


# --- the tables ---------------------------------------------------------------------


def rate(runner: Any) -> float:
    return runner.stored / runner.seconds if runner.seconds else 0.0


def print_rates(model: ModelAlone, servers: list[Server], facts: int, request: int) -> None:
    print(f"\n{facts} facts, {request} a request; each server a new memory\n")
    print("| who | facts/s | / model alone | / SQLite | facts with `similar` |")
    print("|---|---|---|---|---|")
    alone = rate(model)
    print(f"| {model.name} | {alone:.0f} | 1.00 | | |")
    sqlite = {s.label: rate(s) for s in servers if s.backend == "sqlite"}
    for s in servers:
        over = f"{rate(s) / sqlite[s.label]:.2f}" if s.label in sqlite else ""
        print(
            f"| {s.name} over HTTP | {rate(s):.0f} | {rate(s) / alone:.2f} | {over} | "
            f"{s.with_similar} |"
        )
    print("\nissue 33's bounds (this checkout):\n")
    print("| bound | measured | met |")
    print("|---|---|---|")
    mine = {s.backend: rate(s) for s in servers if s.label == "this"}
    checks = []
    if "sqlite" in mine:
        checks.append(("SQLite over HTTP >= 0.6 x model alone", mine["sqlite"] / alone, 0.6))
    if "sqlite" in mine and "postgresql" in mine:
        checks.append(("PostgreSQL >= 0.8 x SQLite", mine["postgresql"] / mine["sqlite"], 0.8))
    if "postgresql" in mine:
        checks.append(("PostgreSQL over HTTP / model alone", mine["postgresql"] / alone, 0.48))
    for what, value, bound in checks:
        print(f"| {what} | {value:.2f} | {'yes' if value >= bound else 'NO'} |")


def print_breakdown(found: dict[str, dict[str, float]], http: dict[str, float], facts: int) -> None:
    backends = list(found)
    print(f"\nwhere a store's time goes: {facts} more facts in each memory, in this process")
    print("(ms a fact; indented rows are parts of the row above)\n")
    print("| phase | " + " | ".join(backends) + " |")
    print("|---" * (len(backends) + 1) + "|")
    labels: list[str] = []
    for seconds in found.values():
        labels += [label for label in seconds if label not in labels and label != "total"]
    order = [label for *_, label in TIMED if label in labels] + ["commit"]
    for label in dict.fromkeys(order):
        if label not in labels:
            continue
        cells = [f"{found[b].get(label, 0.0) * 1000 / facts:.3f}" for b in backends]
        print(f"| {label} | " + " | ".join(cells) + " |")
    cells = [f"{found[b]['total'] * 1000 / facts:.3f}" for b in backends]
    print("| **Memory.store_batch, all** | " + " | ".join(cells) + " |")
    cells = [f"{1000 / http[b]:.3f}" if http.get(b) else "" for b in backends]
    print("| over HTTP (the run above) | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=20_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--request", type=int, default=1000, help="facts a request (max 1000)")
    parser.add_argument("--model-batch", type=int, default=64, help="the model alone's batches")
    parser.add_argument("--breakdown", type=int, default=2000, help="facts timed by phase")
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="LABEL=CHECKOUT",
        help="another checkout's servers too (the commit before a change); repeatable",
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args()
    if args.smoke:
        args.facts, args.request, args.breakdown = 120, 40, 40
    machine.report_load("onnxruntime's choice, as a server makes it")
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    checkouts = [("this", ROOT)]
    for spec in args.against:
        label, _, where = spec.partition("=")
        if not (label and where):
            raise SystemExit(f"--against {spec!r}: want LABEL=CHECKOUT")
        checkouts.append((label, Path(where).resolve()))
    texts = facts_text(args.facts)
    more = facts_text(args.breakdown, offset=args.facts)
    databases = Databases("postgresql") if "postgresql" in backends else None
    servers: list[Server] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if databases is not None:
                print(databases.describe())
            model = ModelAlone(Path(tmp) / "weights", args.model_batch)
            for n, (label, root) in enumerate(checkouts):
                for backend in backends:
                    env = {}
                    if backend == "postgresql" and databases is not None:
                        env["EMBORNAL_DATABASE__URL"] = str(databases.url(n + 1))
                    home = Path(tmp) / f"{label}-{backend}"
                    servers.append(Server(label, backend, root, home, env))
            for server in servers:
                server.start()
            model.store(payload(texts[:10], 0))  # the first run of a session pays its setup
            model.seconds, model.stored = 0.0, 0
            side_by_side([model, *servers], texts, args.request)
            for server in servers:
                server.stop()
            print_rates(model, servers, args.facts, args.request)
            mine = [s for s in servers if s.label == "this"]
            found = {s.backend: breakdown(s, model, more, args.request) for s in mine}
            print_breakdown(found, {s.backend: rate(s) for s in mine}, len(more))
        finally:
            for server in servers:
                server.stop()
            if databases is not None:
                databases.close()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
