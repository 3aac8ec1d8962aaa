"""Concurrent load on a real `embornal serve`: writes/s and latencies.

    python -m bench.load_bench [--duration 20] [--writers 8] [--readers 8] [--model minilm-l6]
    python -m bench.load_bench --smoke    # 2 s, 2 writers, 2 readers: checks that it works

Starts the server on 127.0.0.1 in a temporary EMBORNAL_HOME (its own key, memory
and weights; the offline minilm-l6 model unless --model none), then runs the load
of tests/ops for --duration seconds: each writer POSTs one fact at a time to
/v1/facts; each reader loops over a recall (GET /v1/facts/{id}), a peek, a keyword
search and a hybrid search until the writers stop. Prints throughput, latency
percentiles, errors by kind and the 5xx count, then checks that every
acknowledged fact is in memory.db and that the file passes its integrity checks.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench import machine
from tests.ops.live import LiveServer, LoadResult, inspect_database, percentile, run_load


def table(result: LoadResult, checks: list[tuple[str, str]]) -> str:
    ms = 1000.0
    w, r = result.write_latencies, result.read_latencies
    rows = [
        ("writers / readers", f"{result.writers} / {result.readers}"),
        ("duration", f"{result.write_seconds:.1f} s"),
        ("writes acknowledged", f"{len(w)}"),
        ("writes/s", f"{result.writes_per_second:.1f}"),
        (
            "write p50 / p95 / p99",
            " / ".join(f"{percentile(w, q) * ms:.0f} ms" for q in (50, 95, 99)),
        ),
        ("write max", f"{max(w, default=0) * ms:.0f} ms"),
        (
            "reads",
            f"{len(r)} ({', '.join(f'{k} {n}' for k, n in sorted(result.reads_by_kind.items()))})",
        ),
        ("reads/s", f"{result.reads_per_second:.1f}"),
        ("read p50 / p95", " / ".join(f"{percentile(r, q) * ms:.0f} ms" for q in (50, 95))),
        ("5xx responses", f"{result.server_errors}"),
    ]
    if result.errors:
        rows += [(f"error: {kind}", str(n)) for kind, n in sorted(result.errors.items())]
    else:
        rows.append(("errors", "none"))
    rows += checks
    return "\n".join(["| measure | value |", "|---|---|"] + [f"| {n} | {v} |" for n, v in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of writing")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--model", default="minilm-l6", help="minilm-l6 (offline) or none")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args(argv)
    if args.smoke:
        args.duration, args.writers, args.readers = 2.0, 2, 2
    machine.report_load()

    with tempfile.TemporaryDirectory(prefix="embornal-load-") as tmp:
        server = LiveServer(Path(tmp) / "home", args.model)
        try:
            server.start()
            print(f"server on {server.base_url}, model {args.model}, home {server.home}")
            result = run_load(
                server,
                writers=args.writers,
                readers=args.readers,
                facts_per_writer=None,
                duration=args.duration,
                tag="benchrun",
            )
            state = inspect_database(server.db_path)
            locked = server.logs().count("database is locked")
        finally:
            server.stop()
    lost = [i for i, c in result.acknowledged.items() if state.facts.get(i) != c]
    sound = (
        state.integrity == ["ok"]
        and state.fts_problem is None
        and not state.embedded_without_vec
        and not state.vec_without_embedding
    )
    checks = [
        ("acknowledged, not found", str(len(lost))),
        ("locked in server log", str(locked)),
        ("memory.db checks", "ok" if sound else f"FAILED: {state}"),
    ]
    machine.report_load()
    print(table(result, checks))
    return 0 if not result.errors and not lost and not locked and sound else 1


if __name__ == "__main__":
    sys.exit(main())
