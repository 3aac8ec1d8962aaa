"""What every bench prints beside its table: the threads it pinned and how busy the
machine was, with a warning when other work may have skewed the figures."""

from __future__ import annotations

import os
import sys

import bench

# A load average above this share of the cores means other processes took CPU time
# the bench would have had: its latencies are then upper bounds, not figures.
BUSY_SHARE = 0.5


def threads() -> int:
    return int(bench.THREADS)


def rss_mb() -> float:
    """Resident memory now (not the peak): what the process holds after the work."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_line(onnx_threads: str | None = None) -> str:
    """'load average 0.12 0.30 0.25 on 2 cores; threads pinned to 1' (+ a warning).
    `onnx_threads` says how the bench's model runs when not pinned like the rest."""
    one, five, fifteen = os.getloadavg()
    cores = os.cpu_count() or 1
    pinned = (
        f"BLAS/OpenMP threads pinned to {threads()}, ONNX threads: {onnx_threads}"
        if onnx_threads
        else f"BLAS/OpenMP/ONNX threads pinned to {threads()}"
    )
    line = f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {cores} cores; {pinned}"
    if one > BUSY_SHARE * cores:
        line += (
            f"\nWARNING: the machine is busy (load {one:.2f} on {cores} cores): "
            "other processes took CPU time; treat these figures as upper bounds"
        )
    return line


def report_load(onnx_threads: str | None = None) -> None:
    print(load_line(onnx_threads))
    sys.stdout.flush()
