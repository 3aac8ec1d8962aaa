"""Read throughput of one replica against two: 16 clients searching one PostgreSQL memory.

    python -m bench.replica_bench [--home DIR] [--facts N] [--duration 20] [--clients 16]
                                  [--mode hybrid] [--database-url URL] [--server-threads T]
    python -m bench.replica_bench --smoke     # a few hundred facts, 2 s a phase

The memory is the PostgreSQL database search_bench keeps under --home (DIR/pgdata,
database embornal_m<N>; `search_bench --backend postgresql --home DIR`), reused when
it holds N facts, else built there with the same generator and 50 policy lines
(without --home: in a pgserver of its own, deleted at the end). N defaults to
100000 when that memory is there, else 10000.

Two `embornal serve` processes start on that database, each with its own home and
one shared token key (as tests/ops/test_replicas.py runs them). Then two phases of
--duration seconds each: the clients (threads, an httpx client each) against
replica 1 alone; then against both, each request to the next replica in turn (a
round-robin balancer in the client, as a proxy would do it). Every request is a
search as `agent` (the ACL's 50 policy lines on): --mode (hybrid) with limit 10 and
peek (no recall writes), each query text used once, so every search embeds its
query (no query-cache hit). Prints searches/s and p50/p95 per phase, the sessions
PostgreSQL opened meanwhile (a replica whose pool is smaller than its concurrent
requests opens and closes connections), and where the CPU went: this process (the
clients), each replica, PostgreSQL (the postmaster and its backends, those that
ended included) and everything else on the machine (the busiest named), out of
cores x seconds.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from app.settings import DatabaseSettings
from bench import machine, search_bench
from bench.corpus import sentences
from bench.databases import Databases
from bench.search_bench import (
    MODEL,
    SUBJECT,
    build,
    cached_embeddings,
    material_and_queries,
    server_env,
    settings_for,
)
from tests.ops.live import LiveServer, percentile, run_cli


class Queries:
    """Query texts never used before in this run: the standard library's comments past
    the ones the facts and search_bench use, then numbered variants of them."""

    def __init__(self, material: int) -> None:
        self._texts = sentences(100_000)[material + search_bench.QUERIES :]
        self._next = itertools.count()
        self._lock = threading.Lock()

    def take(self) -> str:
        with self._lock:
            n = next(self._next)
        text = self._texts[n % len(self._texts)]
        return text if n < len(self._texts) else f"{text} ({n // len(self._texts)})"


class LazyModel:
    """The model, loaded only if the facts' embeddings are not cached under bench/out."""

    def __init__(self) -> None:
        self._embedder: Any = None

    def embed_documents(self, texts: list[str]) -> Any:
        if self._embedder is None:
            from app.embeddings.loader import load_embedder

            with tempfile.TemporaryDirectory() as weights:
                self._embedder = load_embedder(settings_for(Path(weights), MODEL))
        return self._embedder.embed_documents(texts)


@dataclass
class Phase:
    replicas: int
    clients: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    by_replica: Counter[int] = field(default_factory=Counter)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by where they went
    others: list[tuple[str, float]] = field(default_factory=list)  # the busiest of the rest
    sessions: int | None = None  # PostgreSQL sessions (backend processes) opened meanwhile
    load: str = ""

    @property
    def per_second(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0


def search(client: httpx.Client, q: str, mode: str) -> httpx.Response:
    params = {"q": q, "mode": mode, "limit": 10, "peek": True}
    return client.get("/v1/search", params=params)


def run_phase(
    servers: list[LiveServer],
    active: int,
    token: str,
    clients: int,
    duration: float,
    mode: str,
    queries: Queries,
    postmaster: int | None,
    sessions: Callable[[], int],
) -> Phase:
    """`clients` threads searching for `duration` seconds through the first `active`
    replicas, round robin; CPU read from /proc just before and after."""
    targets = servers[:active]
    phase = Phase(active, clients)
    headers = {"Authorization": f"Bearer {token}"}
    turn = itertools.count()
    lock = threading.Lock()
    ready, go, stop = threading.Barrier(clients + 1), threading.Event(), threading.Event()

    def client(_: int) -> None:
        sessions = [httpx.Client(base_url=s.base_url, headers=headers, timeout=60) for s in targets]
        try:
            try:
                for session in sessions:  # a connection to each, and a first search, untimed
                    search(session, queries.take(), mode).raise_for_status()
            except httpx.HTTPError as exc:
                with lock:
                    phase.errors[f"warm-up: {exc}"] += 1
            ready.wait()
            go.wait()
            while not stop.is_set():
                which = next(turn) % len(targets)
                t0 = time.perf_counter()
                try:
                    response = search(sessions[which], queries.take(), mode)
                except httpx.HTTPError as exc:
                    with lock:
                        phase.errors[type(exc).__name__] += 1
                    continue
                elapsed = time.perf_counter() - t0
                with lock:
                    if response.status_code == 200:
                        phase.latencies.append(elapsed)
                        phase.by_replica[which] += 1
                    else:
                        phase.errors[f"HTTP {response.status_code}"] += 1
        finally:
            for session in sessions:
                session.close()

    pids = {f"replica {n + 1}": s.proc.pid for n, s in enumerate(servers) if s.proc is not None}
    if postmaster is not None:
        pids["PostgreSQL"] = postmaster
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for thread in threads:
        thread.start()
    ready.wait()  # every client warmed up and waiting: nothing runs but what is measured
    opened = sessions()
    before = machine.processes()
    busy0, own0, t0 = machine.busy_seconds(), time.process_time(), time.perf_counter()
    go.set()
    time.sleep(duration)
    stop.set()
    for thread in threads:
        thread.join()
    phase.seconds = time.perf_counter() - t0
    busy = machine.busy_seconds() - busy0
    phase.cpu["clients (this process)"] = time.process_time() - own0
    after = machine.processes()
    ours = {os.getpid()}
    for name, pid in pids.items():
        phase.cpu[name] = machine.tree_seconds(after, pid) - machine.tree_seconds(before, pid)
        ours |= machine.tree(before, pid) | machine.tree(after, pid)
    phase.cpu["everything else"] = max(0.0, busy - sum(phase.cpu.values()))
    phase.others = machine.busiest(before, after, ours)
    # Less the one this count itself opened.
    phase.sessions = sessions() - opened - 1
    phase.cpu["idle"] = max(0.0, (os.cpu_count() or 1) * phase.seconds - busy)
    phase.load = machine.load_line().splitlines()[0]
    return phase


def limits(phases: list[Phase], pool: int) -> str:
    """One paragraph: what bounds the throughput here, from the phases' CPU."""
    cores = os.cpu_count() or 1
    lines = []
    for p in phases:
        total = cores * p.seconds
        searches = max(len(p.latencies), 1)
        ours = {k: v for k, v in p.cpu.items() if k not in ("everything else", "idle")}
        per_search = sum(ours.values()) / searches * 1000
        replicas = sum(v for k, v in ours.items() if k.startswith("replica"))
        busy = 1 - p.cpu["idle"] / total
        verdict = "CPU-bound" if busy >= 0.9 else "not CPU-bound (cores left idle)"
        lines.append(
            f"{p.replicas} replica(s), {verdict}: the {cores} cores {busy:.0%} busy; "
            f"each search cost {per_search:.1f} ms of CPU in all (replicas "
            f"{replicas / searches * 1000:.1f}, PostgreSQL "
            f"{ours.get('PostgreSQL', 0.0) / searches * 1000:.1f}, client "
            f"{ours['clients (this process)'] / searches * 1000:.1f}), so these {cores} cores "
            f"serve at most ~{cores * 1000 / per_search:.0f} searches/s, replicas or not"
        )
        if p.sessions is not None and p.sessions > pool * p.replicas:
            # More than filling each pool once.
            lines.append(
                f"  and {p.sessions} PostgreSQL sessions were opened: more requests at once "
                f"than a replica's pool holds ({pool}), so SQLAlchemy opens overflow connections "
                "and closes them on return (a new backend process each)"
            )
    return "\n".join(lines)


def print_report(
    phases: list[Phase], facts: int, mode: str, described: str, args: argparse.Namespace
) -> None:
    print(f"\n{described}")
    threads, pool = args.server_threads, args.pool_size
    onnx = f"{threads} ONNX threads" if threads else "ONNX threads: onnxruntime's choice"
    pooled = f"database.pool_size {pool or DatabaseSettings().pool_size}"
    print(
        f"{facts} facts; model {MODEL}; {phases[0].clients} clients, searches as `{SUBJECT}` "
        f"(ACL: 50 policy lines), mode {mode}, limit 10, peek, every query text new; "
        f"replicas: `embornal serve`, {onnx}, {pooled}{'' if pool else ' (the default)'} each"
    )
    machine.report_load()
    print()
    names = [k for k in phases[-1].cpu if k != "idle"] + ["idle"]
    header = (
        "| replicas | searches | searches/s | p50 ms | p95 ms | errors | split (per replica) "
        "| PostgreSQL sessions opened | " + " | ".join(f"CPU {name}" for name in names) + " |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for p in phases:
        cores_s = (os.cpu_count() or 1) * p.seconds
        cpu = " | ".join(f"{p.cpu.get(name, 0.0) / cores_s:.0%}" for name in names)
        split = " / ".join(str(p.by_replica[n]) for n in range(p.replicas))
        errors = ", ".join(f"{k} {v}" for k, v in p.errors.items()) or "0"
        p50, p95 = (percentile(p.latencies, q) * 1000 for q in (50, 95))
        print(
            f"| {p.replicas} | {len(p.latencies)} | {p.per_second:.1f} | {p50:.1f} | {p95:.1f} "
            f"| {errors} | {split} | {p.sessions} | {cpu} |"
        )
    print("\nCPU: share of all cores over the phase (cores x seconds), read from /proc.")
    for p in phases:
        cores_s = (os.cpu_count() or 1) * p.seconds
        others = ", ".join(f"{name} {cpu / cores_s:.0%}" for name, cpu in p.others if cpu > 0)
        print(f"  during {p.replicas} replica(s): {p.load}; the busiest others: {others}")
    print("\nWhat limits it:")
    print(limits(phases, args.pool_size or DatabaseSettings().pool_size))
    print(
        "On one machine the client, both replicas and PostgreSQL share the same cores: a second "
        "replica adds throughput only while one process leaves cores idle (one Python process "
        "runs its Python code on one core at a time, the GIL; the model and PostgreSQL run "
        "beside it). Replicas scale reads when they run on their own machines."
    )


def default_size(args: argparse.Namespace, databases: Databases) -> int:
    if args.facts is not None:
        return int(args.facts)
    if args.smoke:
        return 400
    if args.home is not None and databases.exists(100_000):
        return 100_000
    return 10_000


def replicas(url: str, root: Path, threads: int, pool: int) -> list[LiveServer]:
    """Two servers on one database, each its own home, one token key between them."""
    key = root / "jwt-secret"
    key.write_text("replica-bench-shared-key-" + os.urandom(24).hex())
    key.chmod(0o600)
    env = server_env(url) | {"EMBORNAL_AUTH__SECRET_FILE": str(key)}
    if threads:
        env["EMBORNAL_EMBEDDING__THREADS"] = str(threads)
    if pool:
        env["EMBORNAL_DATABASE__POOL_SIZE"] = str(pool)
    return [LiveServer(root / f"replica{n}", MODEL, env) for n in (1, 2)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, help="search_bench's --home (its PostgreSQL)")
    parser.add_argument("--facts", type=int, help="default: 100000 if --home holds it, else 10000")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--mode", choices=["keyword", "semantic", "hybrid"], default="hybrid")
    parser.add_argument("--database-url", help="a PostgreSQL maintenance database (.../postgres)")
    parser.add_argument(
        "--server-threads", type=int, default=0, help="each replica's ONNX threads (0: its own)"
    )
    parser.add_argument(
        "--pool-size", type=int, default=0, help="each replica's database.pool_size (0: its own)"
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args(argv)
    if args.smoke:
        args.duration = 2.0
    machine.report_load()
    databases = Databases("postgresql", args.database_url, args.home)
    try:
        size = default_size(args, databases)
        # search_bench's default sentences for this size: the same facts, so its
        # memory can be reused.
        unique, _ = material_and_queries(120 if args.smoke else None, 0, size)
        vectors = cached_embeddings(LazyModel(), unique)
        url = databases.url(size)
        assert url is not None
        with tempfile.TemporaryDirectory(prefix="embornal-replicas-") as tmp:
            root = args.home or Path(tmp)
            t0 = time.perf_counter()
            built = build(root / f"pg-m{size}", size, unique, vectors, url)
            if built["built"]:
                print(f"built {built['built']} facts in {time.perf_counter() - t0:.0f} s")
            phases = measure(args, url, Path(tmp), databases, len(unique))
        described = databases.describe()
    finally:
        databases.close()
    print_report(phases, size, args.mode, described, args)
    return 0 if not any(p.errors for p in phases) else 1


def measure(
    args: argparse.Namespace, url: str, tmp: Path, databases: Databases, material: int
) -> list[Phase]:
    servers = replicas(url, tmp, args.server_threads, args.pool_size)
    try:
        with ThreadPoolExecutor(len(servers)) as pool:
            # The memory is migrated already (the build): both start at once.
            list(pool.map(lambda s: s.start(ready_timeout=600), servers))
        home = servers[0].home
        token = run_cli(
            home, MODEL, "token", "issue", "--subject", SUBJECT, extra=servers[0].extra_env
        ).strip()
        queries = Queries(material)
        postmaster = databases.postmaster_pid()
        engine = create_engine(url, poolclass=NullPool)

        def sessions() -> int:
            """Sessions opened on the memory's database so far (each a backend process)."""
            with engine.connect() as conn:
                return int(
                    conn.exec_driver_sql(
                        "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
                    ).scalar_one()
                )

        try:
            return [
                run_phase(
                    servers,
                    active,
                    token,
                    args.clients,
                    args.duration,
                    args.mode,
                    queries,
                    postmaster,
                    sessions,
                )
                for active in (1, 2)
            ]
        finally:
            engine.dispose()
    finally:
        for server in servers:
            server.stop()
        # The servers' homes go with the temporary directory: a failed request's
        # traceback is printed while it is still there.
        for server in servers:
            first = server.first_traceback()
            if first is not None:
                print(f"{server.home.name} logged an error:\n{first}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
