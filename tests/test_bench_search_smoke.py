"""The search benches run end to end (smoke size, real offline model) and print their tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parent.parent


def run(module: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, "--smoke", *args],
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
    stages = ("embed", "rank keyword", "rank semantic", "score", "hydrate", "recall writes")
    for stage in (*stages, "total, query seen before"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {stage} "))
        assert len([float(cell) for cell in row.split("|")[2:-1]]) == 3


def test_the_profile_searches_as_a_reader_of_everything_when_asked() -> None:
    # The reader's one line is added to the memory: without it every page is empty.
    out = run("bench.search_profile", "--subject", "reader")
    assert "subject `reader` (1 policy line, reads everything)" in out
    row = next(line for line in out.splitlines() if line.startswith("| results a page (mean) "))
    keyword, semantic, hybrid = (float(cell) for cell in row.split("|")[2:-1])
    assert semantic == hybrid == 10.0 and keyword > 0


def test_the_quality_bench_prints_every_figure_per_mode_and_kind() -> None:
    # The real offline model, as `python -m bench.quality` runs by default.
    out = run("bench.quality", "--model", "minilm-l6")
    lines = out.splitlines()
    for shape in ("chats", "chats-worded", "notes"):
        assert any(line.startswith(f"## {shape}, smoke:") for line in lines), out
    for title in ("R@5 per mode", "MRR@10 per mode", "hybrid minus", "the floor's trade"):
        assert sum(line.startswith(title) for line in lines) == 3, out
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| mode")]
    for mode in ("keyword", "semantic", "hybrid"):
        mine = [row for row in rows if row.split("|")[1].strip() == mode]
        # per shape: two metric tables and the floor's trade, each with a row per mode
        assert len(mine) == 9, out
        for row in [r for i, r in enumerate(mine) if i % 3 < 2]:
            for figure in row.split("|")[2:-1]:
                mean, low, high = (
                    float(x)
                    for x in figure.replace("[", "").replace(",", "").replace("]", "").split()
                )
                assert 0.0 <= low <= mean <= high <= 1.0, row
    assert sum(line.startswith("| R@5 | ") for line in lines) == 6, out  # vs keyword, semantic


def test_the_fit_reproduces_itself_at_smoke_size(tmp_path: Path) -> None:
    """bench.fit_ranking fits, writes, and on a second run finds the same numbers."""
    target = tmp_path / "ranking.json"
    first = run("bench.fit_ranking", "--out", str(target))
    assert "hybrid" in first and target.is_file()
    again = run("bench.fit_ranking", "--out", str(target), "--check")
    assert f"the fit reproduces {target}" in again
