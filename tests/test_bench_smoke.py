"""Every bench in bench/ runs in its smoke size and prints its table: a bench that
nothing runs rots unseen (search_bench stopped at the service's batch limit)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.scratch import in_memory_parent

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(p.stem for p in (ROOT / "bench").glob("*_bench.py"))
# Each bench in its smoke size; the soak (bench/soak.py) on both backends.
RUNS = [(name, ()) for name in BENCHES] + [
    ("soak", ()),
    ("soak", ("--backend", "postgresql")),
]


def test_the_benches_are_found() -> None:
    assert {"search_bench", "acl_bench", "load_bench"} <= set(BENCHES)


@pytest.mark.slow  # starts a process per bench (make test-fast leaves it out)
@pytest.mark.long  # 3-20 s a bench: scheduled first (tests/conftest.py)
@pytest.mark.parametrize(("name", "extra"), RUNS, ids=[" ".join((n, *e)) for n, e in RUNS])
def test_bench_runs_in_smoke_mode_and_prints_its_table(name: str, extra: tuple[str, ...]) -> None:
    # The bench's temporary memories and PostgreSQL clusters on a tmpfs, as the tests'
    # (tests/scratch.py): 2-2.4 s less for each bench that starts a PostgreSQL. A short
    # path: a cluster's unix socket lives in its directory (at most 107 bytes).
    scratch = tempfile.mkdtemp(prefix="bench-", dir=in_memory_parent())
    try:
        done = subprocess.run(
            [sys.executable, "-m", f"bench.{name}", "--smoke", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "TMPDIR": scratch},
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # The machine's load with the figures, so a reader can tell a busy run.
    assert any(line.startswith("load average ") for line in lines), done.stdout
    # A markdown table: a header, its rule, and at least one row of figures.
    rules = [i for i, line in enumerate(lines) if line.startswith("|---")]
    assert rules, done.stdout
    first = rules[0]
    assert lines[first - 1].startswith("| ") and lines[first + 1].startswith("| "), done.stdout
    assert not any("nan" in cell.split() for cell in lines[first + 1].split("|")), done.stdout


# --- bench/peer_bench.py: the runner the peer's own python executes -----------------


def ask_runner(requests: list[dict[str, object]]) -> list[dict[str, object]]:
    """bench/peer_runner.py on the stand-in (bench/peer_fake.py), as the bench starts it:
    its ready line, then one answer per request."""
    import json

    lines = "".join(json.dumps(r) + "\n" for r in [*requests, {"op": "quit"}])
    done = subprocess.run(
        [sys.executable, "-m", "bench.peer_runner", "--fake", "unused.db"],
        cwd=ROOT,
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_peer_runner_answers_each_verb_timed_with_its_stages() -> None:
    ready, *answers = ask_runner(
        [
            {"op": "store", "content": "the cat sat on the mat"},
            {"op": "store", "content": "quarterly revenue grew five percent"},
            {"op": "store", "content": "The cat sat on the mat"},  # the same, by its hash
            {"op": "search", "query": "a cat on a mat", "mode": "semantic", "limit": 1},
            {"op": "search", "query": "revenue grew", "mode": "hybrid", "limit": 10},
            {"op": "search", "query": "revenue", "mode": "exact", "limit": 10},
            {"op": "bm25", "query": "revenue grew", "limit": 10},
            {"op": "list", "limit": 10},
            {"op": "embed", "text": "cat"},
            {"op": "no such verb"},
            {"op": "count"},
        ]
    )
    assert ready["ok"] and ready["result"]["package"].startswith("bench.peer_fake")
    assert all(set(a) == {"ok", "seconds", "stages", "result"} for a in answers if a["ok"])
    first, second, again, semantic, hybrid, exact, bm25, listed, embed, unknown, count = answers
    assert first["result"]["stored"] and second["result"]["stored"]
    assert not again["result"]["stored"]
    assert first["seconds"] > 0 and {"embed", "dedup"} <= set(first["stages"])
    assert semantic["result"]["hashes"] == [first["result"]["hash"]]
    assert {"vector", "bm25", "embed"} <= set(hybrid["stages"])
    assert hybrid["result"]["hashes"][0] == second["result"]["hash"]
    assert exact["result"]["hashes"] == bm25["result"]["hashes"] == [second["result"]["hash"]]
    assert listed["result"]["hashes"] == [second["result"]["hash"], first["result"]["hash"]]
    assert len(embed["result"]["vector"]) == 16
    # A request it cannot answer is named, and the runner goes on serving.
    assert unknown == {"ok": False, "error": "ValueError: unknown op 'no such verb'"}
    assert count["result"] == {"count": 2}


def test_stage_timers_give_a_callee_its_own_time_and_time_coroutines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio
    import types

    from bench import stages

    now = [0.0]  # a clock the functions move by hand
    monkeypatch.setattr(stages.time, "perf_counter", lambda: now[0])

    def inner() -> None:
        now[0] += 2.0

    def outer() -> None:
        now[0] += 1.0
        box.inner()

    async def waits() -> str:
        await asyncio.sleep(0)
        now[0] += 3.0
        return "done"

    box = types.SimpleNamespace(inner=inner, outer=outer, waits=waits)
    timers = stages.Timers(exclusive=True)
    for name in ("inner", "outer", "waits"):
        timers.wrap(box, name, name)
    box.outer()
    assert asyncio.run(box.waits()) == "done"
    # The callee's 2 s are its own, not its caller's; a coroutine counts until it returns.
    assert timers.take() == {"inner": 2.0, "outer": 1.0, "waits": 3.0}
    inclusive = stages.Timers()
    inclusive.wrap(box, "outer", "outer")
    box.outer()
    assert inclusive.take() == {"outer": 3.0}  # inclusive: its callee's time counts in it
    inclusive.restore()
    timers.restore()
    assert box.inner is inner and box.outer is outer and box.waits is waits


@pytest.mark.slow  # a process with the real model
def test_the_peer_bench_compares_every_verb_and_splits_our_time() -> None:
    from bench.peer_bench import VERBS

    done = subprocess.run(
        [sys.executable, "-m", "bench.peer_bench", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if "|" in line}
    for verb, _ in VERBS:
        cells = rows[verb].split("|")[2:-1]
        # Both sides timed (the stand-in's figures mean nothing) and the ratio judged.
        assert (
            float(cells[0]) > 0 and float(cells[2]) > 0 and cells[6].strip() in {"met", "NOT met"}
        )
    # Our stages: the model, `similar` and the write on store, the ranking on search.
    for stage in ("embed", "similar", "rows: store", "rank semantic", "rank keyword", "commit"):
        assert stage in rows, stage
