"""Every bench in bench/ runs in its smoke size and prints its table: a bench that
nothing runs rots unseen (search_bench stopped at the service's batch limit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
@pytest.mark.parametrize(("name", "extra"), RUNS, ids=[" ".join((n, *e)) for n, e in RUNS])
def test_bench_runs_in_smoke_mode_and_prints_its_table(name: str, extra: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--smoke", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
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
