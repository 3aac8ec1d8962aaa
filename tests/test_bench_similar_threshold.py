"""bench/similar_threshold.py runs, and the catalog's minilm-l6 cut is the one it measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.embeddings.catalog import MINILM_L6

pytestmark = pytest.mark.slow  # starts a process that loads the real model

ROOT = Path(__file__).resolve().parents[1]


def test_the_measured_threshold_is_the_shipped_one() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.similar_threshold", "--model", MINILM_L6.name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("paraphrases ") for line in lines), done.stdout
    assert any(line.startswith("related ") for line in lines), done.stdout
    (verdict,) = [line for line in lines if line.startswith("threshold ")]
    assert verdict.startswith(f"threshold {MINILM_L6.similar_cosine:.2f}: 60/60"), verdict
