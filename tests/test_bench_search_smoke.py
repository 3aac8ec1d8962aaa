"""The search benches run end to end (smoke size, real offline model) and print their tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(module: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_profile_prints_every_stage_for_every_mode() -> None:
    out = run("bench.search_profile")
    assert "| stage (p50 ms)           |  keyword | semantic |   hybrid |" in out
    stages = ("embed", "rank keyword", "rank semantic", "fuse", "hydrate", "recall writes")
    for stage in (*stages, "total, query seen before"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {stage} "))
        assert len([float(cell) for cell in row.split("|")[2:-1]]) == 3


def test_the_quality_bench_prints_recall_and_mrr_per_mode() -> None:
    out = run("bench.quality")
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    overall = {}
    for mode in ("keyword", "semantic", "hybrid"):
        recall, mrr = (float(x) for x in rows[mode].split("|")[-2].split("/"))
        assert 0.0 <= recall <= 1.0 and 0.0 <= mrr <= 1.0
        overall[mode] = (recall, mrr)
    # Even on the small subset, fusion must not lose what either half finds.
    assert overall["hybrid"] >= max(overall["keyword"], overall["semantic"])
