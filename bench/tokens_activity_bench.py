"""What revocable tokens and the activity record cost, at 100k facts.

    python -m bench.tokens_activity_bench [--facts 100000] [--runs 2000] [--revoked 1000]
        [--backend sqlite|postgresql] [--database-url URL] [--home DIR]
    python -m bench.tokens_activity_bench --smoke       # seconds: what `make test` runs

Builds a memory (bench.ui_bench.build: standard-library comments as text, fake
384-d vectors, through the store service) with `--revoked` revoked tokens on
record, then times:

- the token check a request makes (signature, claims, subject; then the jti against
  the revoked list), in-process, per check: without a revoked list (the verifier as
  it was), with the list as a server keeps it (auth.revocation_check_seconds 0.5:
  a set lookup, the list read again at most twice a second), and read on every
  check (0: one small read of meta per request);
- GET /v1/whoami over ASGI, in-process, with the list off and as kept: what the
  check adds to a whole request;
- a store of one fact through the use case, with no model (the write transaction
  alone, where the entry's insert is), with its activity entry and with the entry
  left out, and the same per fact in batches of 100.

Each figure is a median (p50) and p95 of `--runs` (requests: a quarter, stores: a
tenth, batches: a two-hundredth), after a warm-up; what is compared is timed in
turns, call by call, so that other work on the machine hits both sides alike. With
--home the memory is kept and reused by the next run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.auth.tokens import TokenVerifier
from app.dirs import Dirs
from app.embeddings.fake import FakeEmbedder
from app.main import create_app
from app.runtime import Runtime, open_runtime
from app.services import activity as activity_service
from app.services.tokens import RevocationList
from app.settings import Settings
from app.usecases.memory import Memory, NewFact
from bench import machine
from bench.corpus import sentences
from bench.databases import Databases
from bench.ui_bench import WIDTH, build


def settings_for(home: Path, url: str | None) -> Settings:
    database = {"url": url} if url else {}
    return Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": "none", "width": WIDTH, "download": False},
        database=database,
    )


def p50_p95(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * len(ordered)))]


def timed(run: Callable[[], object], runs: int, warm: int = 20) -> list[float]:
    """Microseconds of each of `runs` calls, after `warm` untimed ones."""
    for _ in range(warm):
        run()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def revoke_many(memory: Memory, count: int) -> None:
    """`count` revoked tokens on record (each issued, then revoked), once per memory."""
    have = sum(1 for t in memory.list_tokens("default") if t.status == "revoked")
    for _ in range(max(0, count - have)):
        issued = memory.sign_token("default", dt.timedelta(days=30), label="bench")
        memory.revoke_token("default", issued.record.jti)


@contextmanager
def without_activity() -> Iterator[None]:
    """The store as it was before the record: the entry's insert left out."""
    kept = activity_service.record_many
    activity_service.record_many = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        yield
    finally:
        activity_service.record_many = kept


class Unchecked(TokenVerifier):
    """The verifier as it was before revocation: it takes no revoked list."""

    def check_revocations(self, revoked: Callable[[str], bool]) -> None:
        pass


def token_rows(rt: Runtime, settings: Settings, runs: int) -> list[list[str]]:
    memory = Memory(rt)
    token = memory.sign_token("default", dt.timedelta(hours=1)).token
    rows: list[list[str]] = []
    base = None
    for name, max_age in (
        ("token check, no revoked list (before)", None),
        ("token check, revoked list kept, read every 0.5 s", 0.5),
        ("token check, revoked list read on every check (0 s, the default)", 0.0),
    ):
        verifier = TokenVerifier(settings)
        if max_age is not None:
            rt.revocations = RevocationList(max_age)
            verifier.check_revocations(memory.token_revoked)
        p50, p95 = p50_p95(timed(lambda v=verifier: v.verify(token), runs))
        added = "—" if base is None else f"{p50 - base:+.1f}"
        base = p50 if base is None else base
        rows.append([name, f"{p50:.1f}", f"{p95:.1f}", added])
    return rows


def paired(
    runs: int, first: Callable[[], object], second: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """Microseconds of `runs` calls of each, taken in turns, each side first every other
    time: a busy moment of the machine (other processes on its two cores) hits both
    alike, and so does whatever the call after a switch pays."""
    for _ in range(5):
        first(), second()
    a: list[float] = []
    b: list[float] = []
    for n in range(runs):
        order = ((first, a), (second, b)) if n % 2 == 0 else ((second, b), (first, a))
        for run, into in order:
            started = time.perf_counter()
            run()
            into.append((time.perf_counter() - started) * 1e6)
    return a, b


def two_rows(
    names: tuple[str, str], samples: tuple[list[float], list[float]], per: int = 1
) -> list[list[str]]:
    (b50, b95), (w50, w95) = (p50_p95([s / per for s in part]) for part in samples)
    return [
        [names[0], f"{b50:.1f}", f"{b95:.1f}", "—"],
        [names[1], f"{w50:.1f}", f"{w95:.1f}", f"{w50 - b50:+.1f}"],
    ]


def request_rows(rt: Runtime, settings: Settings, runs: int) -> list[list[str]]:
    memory = Memory(rt)
    token = memory.sign_token("default", dt.timedelta(hours=1)).token
    headers = {"Authorization": f"Bearer {token}"}
    rt.revocations = RevocationList(0.5)
    with (
        TestClient(create_app(settings, runtime=rt, verifier=Unchecked(settings))) as before,
        TestClient(create_app(settings, runtime=rt, verifier=TokenVerifier(settings))) as now,
    ):
        samples = paired(
            runs // 4,
            lambda: before.get("/v1/whoami", headers=headers),
            lambda: now.get("/v1/whoami", headers=headers),
        )
    return two_rows(
        ("GET /v1/whoami, no revoked list (before)", "GET /v1/whoami, revoked list kept (0.5 s)"),
        samples,
    )


def store_rows(rt: Runtime, runs: int) -> list[list[str]]:
    """Stores with no model: the write transaction alone, where the entry's insert is
    (a model's embedding and the `similar` search come before it and do not change)."""
    rt.embedder = None
    memory = Memory(rt, via="rest")
    counter = iter(range(10**9))

    def one() -> Any:
        n = next(counter)
        return memory.store("default", NewFact(f"/bench/s{n % 20}", f"bench store number {n}"))

    def batch() -> Any:
        base = next(counter) * 1000
        items = [NewFact(f"/bench/b{k % 20}", f"bench batch fact {base + k}") for k in range(100)]
        return memory.store_batch("default", items)

    def bare(run: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            with without_activity():
                return run()

        return call

    rows = two_rows(
        ("store one fact, without its entry (before)", "store one fact, with its entry"),
        paired(max(10, runs // 10), bare(one), one),
    )
    rows += two_rows(
        (
            "batch of 100, per fact, without entries (before)",
            "batch of 100, per fact, with entries",
        ),
        paired(max(3, runs // 200), bare(batch), batch),
        per=100,
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="memory size")
    parser.add_argument("--runs", type=int, default=2000, help="timed token checks")
    parser.add_argument("--revoked", type=int, default=1000, help="revoked tokens on record")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL maintenance database URL")
    parser.add_argument("--home", type=Path, help="keep (and reuse) the memory here")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args()
    size, runs, revoked = args.facts, args.runs, args.revoked
    if args.smoke:
        size, runs, revoked = 300, 60, 20
    databases = Databases(args.backend, args.database_url, args.home)
    try:
        with tempfile.TemporaryDirectory(prefix="embornal-tokens-bench-") as scratch:
            home = (args.home or Path(scratch)) / f"m{size}"
            settings = settings_for(home, databases.url(size))
            rt = open_runtime(settings)
            rt.embedder = FakeEmbedder(WIDTH)
            try:
                built = build(rt, size, sentences(min(size, 60_000)))
                revoke_many(Memory(rt), revoked)
                tokens = token_rows(rt, settings, runs)
                requests = request_rows(rt, settings, runs)
                stores = store_rows(rt, runs)
            finally:
                rt.close()
        described = databases.describe()
    finally:
        databases.close()
    if built:
        print(f"built {size:,} facts in {built:.1f} s")
    print(machine.load_line())
    print(described)
    print(
        f"{size:,} facts, {revoked:,} revoked tokens on record; µs, p50 / p95 of {runs} token "
        f"checks, {runs // 4} requests, {max(10, runs // 10)} stores and "
        f"{max(3, runs // 200)} batches, in-process"
    )
    print()
    print("| what | p50 µs | p95 µs | added (p50) |")
    print("|---|---|---|---|")
    for row in tokens + requests + stores:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
