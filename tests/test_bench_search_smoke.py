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
    stages = ("embed", "rank keyword", "rank semantic", "fuse", "hydrate", "recall writes")
    for stage in (*stages, "total, query seen before"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {stage} "))
        assert len([float(cell) for cell in row.split("|")[2:-1]]) == 3


def test_the_quality_bench_prints_every_figure_per_mode_and_kind() -> None:
    # The real offline model, as `python -m bench.quality` runs by default.
    out = run("bench.quality", "--model", "minilm-l6")
    lines = out.splitlines()
    for title in ("R@5 per mode", "R@10 per mode", "MRR@10 per mode", "hybrid minus"):
        assert any(line.startswith(title) for line in lines), out
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| mode")]
    for mode in ("keyword", "semantic", "hybrid"):
        mine = [row for row in rows if row.split("|")[1].strip() == mode]
        # three metric tables and the no-answer table, each with a row per mode
        assert len(mine) == 4, out
        for row in mine[:3]:
            for figure in row.split("|")[2:-1]:
                mean, low, high = (
                    float(x)
                    for x in figure.replace("[", "").replace(",", "").replace("]", "").split()
                )
                assert 0.0 <= low <= mean <= high <= 1.0, row
    assert sum(line.startswith("| R@5 | ") for line in lines) == 2, out  # vs keyword, semantic


def test_the_quality_bench_asks_the_worded_view_when_told() -> None:
    out = run("bench.quality", "--worded")
    assert "split smoke-worded:" in out, out
    assert sum(line.startswith("| hybrid |") for line in out.splitlines()) == 4, out


def test_the_hybrid_cost_bench_prints_every_variant_against_the_fusion_before() -> None:
    out = run("bench.hybrid_cost")
    rows = [line for line in out.splitlines() if line.startswith("| 1500 |")]
    names = [row.split("|")[2].strip() for row in rows]
    assert names == [
        "semantic",
        "hybrid (as it runs)",
        "hybrid, one thread",
        "hybrid, one thread, every relaxed match",
        "hybrid, a text shown again (no page rule)",
        "hybrid, semantic half not centered",
        "hybrid, strict tier only (7ca32f6)",
    ]
    assert rows[-1].split("|")[5].strip() == "1.00"
    assert all(float(row.split("|")[3]) > 0 for row in rows)


def test_the_fusion_explorer_prints_the_service_against_the_shares_alone() -> None:
    """The README's fusion figures come from bench.fusion_explore: it runs, and prints
    the service's fusion, the shares alone, the time words kept and the semantic half
    not centered or centered otherwise, per kind."""
    out = run("bench.fusion_explore", "--model", "fake")
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:-1]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith("| variant")
    }
    for name in (
        "hybrid as served, shares only (search.SHARES_ONLY)",
        "hybrid as served (search.FUSION)",
        "hybrid as served, a text shown again before the others",
        "hybrid as served, no ranking of the span's own facts",
        "hybrid as served, the time words kept in the keyword half",
        "hybrid as served, semantic half not centered (plain cosine order)",
        "hybrid as served, semantic half depth 40, head 10, weight 0.5",
    ):
        cells = rows[name]
        *kinds, empty = cells
        for cell in kinds:
            recall, mrr = (float(x) for x in cell.split("/"))
            assert 0.0 <= recall <= 1.0 and 0.0 <= mrr <= 1.0, (name, cell)
        assert 0.0 <= float(empty) <= 1.0
