"""How long `embornal` takes to start, per command: a table of medians against the goals.

    python -m bench.cli_startup            # 7 runs a command, after a warm-up run
    python -m bench.cli_startup --smoke    # 1 run a command: it works, no timing claim

Each run is a fresh process of the installed console script (or `python -m app.cli`
when there is none) on a temporary EMBORNAL_HOME: one with no model, and one with
the offline model (minilm-l6, from its installed packages) for the commands that
embed, as a new user's memory has it after `make run` with no network. Python's
bytecode cache is allowed (an installed package has one), and the warm-up run fills
it, so the table measures imports and work, not compiling. Goals (issues 9 and 31):
`--help` and `paths` under 0.5 s, a `memory store` with no model under 1 s, a search
(and a store) with the model under 1.5 s. CPU s is the child's user + system time:
what the command costs when the machine has nothing else to do.
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

# (row, arguments, goal in seconds, with the offline model)
COMMANDS: list[tuple[str, list[str], float, bool]] = [
    ("--help", ["--help"], 0.5, False),
    ("--version", ["--version"], 0.5, False),
    ("paths", ["paths"], 0.5, False),
    ("memory --help", ["memory", "--help"], 0.5, False),
    ("memory store (no model)", ["memory", "store", "/bench/start", "a fact"], 1.0, False),
    ("memory show", ["memory", "show", "/bench"], 1.0, False),
    ("memory list", ["memory", "list", "--limit", "5"], 1.0, False),
    ("memory search (keyword)", ["memory", "search", "fact", "--mode", "keyword"], 1.0, False),
    ("memory search (minilm-l6)", ["memory", "search", "where is the kettle"], 1.5, True),
    ("memory store (minilm-l6)", ["memory", "store", "/bench/model", "a kettle"], 1.5, True),
]
MODEL = "minilm-l6"


def command(source: Path | None) -> list[str]:
    """The installed script; for another checkout (--source), its app.cli module."""
    script = Path(sys.executable).with_name("embornal")
    if script.is_file() and source is None:
        return [str(script)]
    return [sys.executable, "-m", "app.cli"]


def environment(home: Path, source: Path | None, model: str = "none") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env |= {"EMBORNAL_HOME": str(home), "EMBORNAL_EMBEDDING__MODEL": model}
    if model != "none":
        # Copied from the installed packages on the first run; never downloaded.
        width = {"minilm-l6": "384"}[model]
        env |= {"EMBORNAL_EMBEDDING__WIDTH": width, "EMBORNAL_EMBEDDING__DOWNLOAD": "false"}
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
        envs = {
            False: environment(Path(tmp) / "plain", source),
            True: environment(Path(tmp) / "model", source, MODEL),
        }
        # The model's memory and files before anything is timed, in smoke mode too.
        first = subprocess.run(
            [*command(source), "memory", "store", "/bench/kettle", "the kettle is blue"],
            env=envs[True],
            capture_output=True,
            text=True,
            cwd=source,
        )
        if first.returncode != 0 or "waits for an embedding model" in first.stderr:
            print(f"WARNING: {MODEL} did not load; its rows time commands without a model")
        if not options.smoke:
            for _name, args, _goal, with_model in commands:
                # The bytecode cache, and a memory.db to show.
                time_run(args, envs[with_model], source)
        print("| command | best s | median s | CPU s | goal s | |")
        print("|---|---:|---:|---:|---:|---|")
        for name, args, goal, with_model in commands:
            runs_of = [time_run(args, envs[with_model], source) for _ in range(runs)]
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
