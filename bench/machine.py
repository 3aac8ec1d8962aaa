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


def load_line() -> str:
    """'load average 0.12 0.30 0.25 on 2 cores; threads pinned to 1' (+ a warning)."""
    one, five, fifteen = os.getloadavg()
    cores = os.cpu_count() or 1
    line = (
        f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {cores} cores; "
        f"BLAS/OpenMP/ONNX threads pinned to {threads()}"
    )
    if one > BUSY_SHARE * cores:
        line += (
            f"\nWARNING: the machine is busy (load {one:.2f} on {cores} cores): "
            "other processes took CPU time; treat these figures as upper bounds"
        )
    return line


def report_load() -> None:
    print(load_line())
    sys.stdout.flush()


# --- where the CPU went (Linux /proc; zeros elsewhere) --------------------------------

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot, all cores together
    (/proc/stat: every state but idle and iowait)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except OSError:
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already counted in user: the first 8 fields are the whole.
    return (sum(fields[:8]) - idle) / TICK


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The command name (field 2) may hold spaces: split after its ')'.
            rest = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK


def tree_seconds(root: int) -> dict[int, float]:
    """pid -> CPU seconds of `root` and every process below it (PostgreSQL's postmaster
    and its backends). Compare two readings per pid: a process that exited between
    them is lost, one that started counts from zero."""
    stats: dict[int, tuple[int, float]] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        found = _stat(pid)
        if found is not None:
            stats[pid] = found
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out[pid] = stats[pid][1]
            todo += children.get(pid, [])
    return out


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two tree_seconds readings."""
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in after.items())
