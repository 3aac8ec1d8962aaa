"""Search over HTTP with servers side by side, paired: this checkout against another
(the commit before a change), a difference one run of each cannot tell from the noise.

    python -m bench.http_pair_bench --home /tmp/m --against before=/tmp/prev:/tmp/m-prev
    python -m bench.http_pair_bench --home /tmp/m --facts 10000,100000 --against ...
    python -m bench.http_pair_bench --home /tmp/m --with-env t1=EMBORNAL_EMBEDDING__THREADS=1
    python -m bench.http_pair_bench --smoke             # seconds: what `make test` runs

Each checkout serves the memory its own `bench.search_bench` built (DIR/m{facts} of its
`--home`: the same generator and policies, so the same facts): this one's is built
here when missing, another's must be there already (its schema is its own); a
`--with-env` server is this checkout again, on this memory, with other settings. All the
servers run at once, each with its own code (`embornal serve` in its directory, this
environment's Python), each as a server runs by default (the model on every core).

The questions are sentences no fact holds and no server has seen, each asked once per
mode as `bench.search_bench` asks them over HTTP, back to back, `peek` (nothing is
written; `bench.search_bench.http_text`).
They go in blocks of BLOCK to each server in turn, the order rotating from block to
block, so a busy moment of the shared machine falls on every server alike: single runs
one after the other moved p50 by 20-40% from run to run here; blocks side by side hold
a ratio to a few percent. Prints p50 / p95 per mode and server, and each p50 over the
last server's (the commit before, when it is given last).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.embeddings.loader import load_embedder
from bench import machine, search_bench
from bench.search_bench import (
    MODEL,
    SUBJECT,
    build,
    cached_embeddings,
    http_text,
    material_and_queries,
    ms,
    settings_for,
)
from tests.ops.live import ROOT, LiveServer, run_cli

MODES = ("keyword", "semantic", "hybrid")
BLOCK = 10  # questions a server answers before the next one's turn


class Served:
    """One checkout's server on its memory, with a client holding the subject's token."""

    def __init__(
        self, label: str, root: Path, home: Path, env: dict[str, str] | None = None
    ) -> None:
        if not (home / "memory.db").exists():
            raise SystemExit(
                f"{label}: no memory at {home} (build it with that checkout's "
                "bench.search_bench --home)"
            )
        self.label, self.root, self.home, self.env = label, root, home, env or {}
        self.server = LiveServer(home, MODEL, self.env, root=root)
        self.client: httpx.Client | None = None

    def start(self) -> None:
        self.server.start(ready_timeout=600)
        token = run_cli(
            self.home, MODEL, "token", "issue", "--subject", SUBJECT, extra=self.env, root=self.root
        )
        self.client = httpx.Client(
            base_url=self.server.base_url,
            headers={"Authorization": f"Bearer {token.strip()}"},
            timeout=60,
        )

    def search(self, text: str, mode: str) -> float:
        """Seconds for one search, as the client sees it."""
        assert self.client is not None
        params: dict[str, str | int | bool] = {
            "q": http_text(text, mode),
            "mode": mode,
            "limit": 10,
            "peek": True,
        }
        started = time.perf_counter()
        response = self.client.get("/v1/search", params=params)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        return elapsed

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        self.server.stop()


def side_by_side(servers: list[Served], questions: list[str], warm: list[str]) -> dict[Any, Any]:
    """{(label, mode): [seconds]}: blocks of BLOCK questions to each server in turn."""
    for served in servers:
        for text in warm:
            for mode in MODES:
                served.search(text + " warm", mode)
    times: dict[Any, list[float]] = {(s.label, m): [] for s in servers for m in MODES}
    for number, start in enumerate(range(0, len(questions), BLOCK)):
        block = questions[start : start + BLOCK]
        for turn in range(len(servers)):
            served = servers[(number + turn) % len(servers)]
            for text in block:
                for mode in MODES:
                    times[(served.label, mode)].append(served.search(text, mode))
    return times


def print_table(size: int, servers: list[Served], times: dict[Any, list[float]]) -> None:
    base = servers[-1].label
    count = len(times[(base, MODES[0])])
    print(f"\n{size} facts, {count} questions a mode and server (p50 / p95 ms)\n")
    labels = [s.label for s in servers]
    header = ["mode", *labels, *(f"{label} / {base}" for label in labels[:-1])]
    print("| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    for mode in MODES:
        base_p50 = statistics.median(times[(base, mode)])
        cells = [mode]
        cells += ["{:.1f} / {:.1f}".format(*ms(times[(label, mode)])) for label in labels]
        cells += [
            f"{statistics.median(times[(label, mode)]) / base_p50:.2f}" for label in labels[:-1]
        ]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", default="10000", help="sizes, comma-separated")
    parser.add_argument("--home", type=Path, help="this checkout's memories (built if missing)")
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="LABEL=CHECKOUT:HOME",
        help="another checkout and the --home its bench.search_bench built; repeatable",
    )
    parser.add_argument(
        "--with-env",
        action="append",
        default=[],
        metavar="LABEL=KEY=VALUE[,KEY=VALUE]",
        help="this checkout once more, its server with these settings (on the same memory); "
        "repeatable",
    )
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args()
    unique = None
    if args.smoke:
        args.facts, args.questions, unique = "1500", 2 * BLOCK, 120
    machine.report_load("onnxruntime's choice, as a server makes it")
    largest = max(int(size) for size in args.facts.split(","))
    # bench.search_bench's sentences for these sizes, so that its memories are reused.
    facts_text, asked = material_and_queries(unique, search_bench.QUERIES + args.questions, largest)
    questions = asked[search_bench.QUERIES :]
    warm = asked[:5]
    others = []
    for spec in args.against:
        label, _, where = spec.partition("=")
        checkout, _, home = where.partition(":")
        if not (label and checkout and home):
            raise SystemExit(f"--against {spec!r}: want LABEL=CHECKOUT:HOME")
        others.append((label, Path(checkout).resolve(), Path(home)))
    variants = []
    for spec in args.with_env:
        label, _, settings = spec.partition("=")
        pairs = [item.partition("=") for item in settings.split(",") if item]
        if not label or not pairs or any(not key or not eq for key, eq, _ in pairs):
            raise SystemExit(f"--with-env {spec!r}: want LABEL=KEY=VALUE[,KEY=VALUE]")
        variants.append((label, {key: value for key, _, value in pairs}))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.home or Path(tmp)
        if args.smoke and not others:
            # This checkout against itself: every path of a comparison, in seconds.
            others.append(("again", ROOT, root))
        for size in (int(s) for s in args.facts.split(",")):
            mine = root / f"m{size}"
            if not (mine / "memory.db").exists():
                embedder = load_embedder(settings_for(Path(tmp) / "weights", MODEL))
                vectors = cached_embeddings(embedder, facts_text)
                build(mine, size, facts_text, vectors)
            servers = [Served("this", ROOT, mine)]
            servers += [Served(label, ROOT, mine, env) for label, env in variants]
            servers += [Served(label, path, home / f"m{size}") for label, path, home in others]
            try:
                for served in servers:
                    served.start()
                times = side_by_side(servers, questions, warm)
            finally:
                for served in servers:
                    served.stop()
            print_table(size, servers, times)
    print(machine.load_line("onnxruntime's choice, as a server makes it"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
