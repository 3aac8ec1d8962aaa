"""How long `embornal` takes to start, per command: a table of medians against the goals.

    python -m bench.cli_startup            # 7 runs a command, after a warm-up run
    python -m bench.cli_startup --smoke    # 1 run a command: it works, no timing claim

Each run is a fresh process of the installed console script (or `python -m app.cli`
when there is none) on a temporary EMBORNAL_HOME with no model, as a new user's
first commands are. Python's bytecode cache is allowed (an installed package has
one), and the warm-up run fills it, so the table measures imports, not compiling.
Goals (issue 9): `--help` and `paths` under 0.5 s, a `memory store` with no model
under 1 s. CPU s is the child's user + system time: what the command costs when
the machine has nothing else to do.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import report_load

COMMANDS: list[tuple[str, list[str], float]] = [
    ("--help", ["--help"], 0.5),
    ("--version", ["--version"], 0.5),
    ("paths", ["paths"], 0.5),
    ("memory --help", ["memory", "--help"], 0.5),
    ("memory store (no model)", ["memory", "store", "/bench/start", "a fact"], 1.0),
    ("memory show", ["memory", "show", "/bench"], 1.0),
]


def command(source: Path | None) -> list[str]:
    """The installed script; for another checkout (--source), its app.cli module."""
    script = Path(sys.executable).with_name("embornal")
    if script.is_file() and source is None:
        return [str(script)]
    return [sys.executable, "-m", "app.cli"]


def environment(home: Path, source: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env |= {"EMBORNAL_HOME": str(home), "EMBORNAL_EMBEDDING__MODEL": "none"}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


def time_run(args: list[str], env: dict[str, str], source: Path | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [*command(source), *args], env=env, capture_output=True, text=True, cwd=source
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"`embornal {' '.join(args)}` failed: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one run a command, no warm-up")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--source", type=Path, help="time another checkout (git worktree)")
    parser.add_argument("--skip", action="append", default=[], help="a command to leave out")
    options = parser.parse_args(argv)
    source = options.source
    commands = [c for c in COMMANDS if c[0] not in options.skip]
    runs = 1 if options.smoke else options.runs
    with tempfile.TemporaryDirectory(prefix="embornal-startup-") as tmp:
        env = environment(Path(tmp), source)
        if not options.smoke:
            for _name, args, _goal in commands:
                time_run(args, env, source)  # the bytecode cache, and a memory.db to show
        print("| command | best s | median s | CPU s | goal s | |")
        print("|---|---:|---:|---:|---:|---|")
        for name, args, goal in commands:
            runs_of = [time_run(args, env, source) for _ in range(runs)]
            walls = [wall for wall, _cpu in runs_of]
            cpu = statistics.median(c for _wall, c in runs_of)
            best, median = min(walls), statistics.median(walls)
            verdict = "" if options.smoke else ("ok" if best < goal else "SLOW")
            print(f"| {name} | {best:.3f} | {median:.3f} | {cpu:.3f} | {goal:.1f} | {verdict} |")
    print(
        f"{runs} run(s) a command. The verdict is on the best run, as timeit's advice goes: "
        "on a shared machine the others also measure its other load (compare CPU s)."
    )
    report_load()
    return 0


if __name__ == "__main__":
    sys.exit(main())
