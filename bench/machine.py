"""What every bench prints beside its table: the threads it pinned and how busy the
machine was, with a warning when other work may have skewed the figures."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Proc:
    parent: int
    name: str
    own: float  # user + system CPU seconds of the process itself
    reaped: float  # ... of its children that exited and were waited for


def processes() -> dict[int, Proc]:
    """Every process now, from /proc/<pid>/stat."""
    out = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                head, _, rest = stat.read().rpartition(")")
        except OSError:
            continue  # gone meanwhile
        # The command name (field 2) may hold spaces: split after its ')'.
        fields = rest.split()
        own = (int(fields[11]) + int(fields[12])) / TICK
        reaped = (int(fields[13]) + int(fields[14])) / TICK
        out[pid] = Proc(int(fields[1]), head.partition("(")[2], own, reaped)
    return out


def tree(snapshot: dict[int, Proc], root: int) -> set[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, proc in snapshot.items():
        children.setdefault(proc.parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in snapshot and pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def tree_seconds(snapshot: dict[int, Proc], root: int) -> float:
    """CPU seconds of a process tree so far: its live processes' own, plus what its
    exited children had (their parent, in the tree, reaped them). The difference of
    two readings is what the tree spent between them, including processes that
    started and ended in between (PostgreSQL's backend per connection)."""
    return sum(snapshot[pid].own + snapshot[pid].reaped for pid in tree(snapshot, root))


def busiest(
    before: dict[int, Proc], after: dict[int, Proc], skip: set[int], count: int = 3
) -> list[tuple[str, float]]:
    """The processes (by name) that spent the most CPU seconds between two snapshots,
    outside `skip`: who else was using the machine."""
    spent: dict[str, float] = {}
    for pid, proc in after.items():
        if pid in skip:
            continue
        earlier = before.get(pid)
        delta = proc.own - (earlier.own if earlier else 0.0)
        # Kernel workers rename themselves by the work in hand: kworker/1:0-events.
        name = proc.name.partition("/")[0] if proc.name.startswith("kworker") else proc.name
        spent[name] = spent.get(name, 0.0) + max(0.0, delta)
    return sorted(spent.items(), key=lambda item: -item[1])[:count]
