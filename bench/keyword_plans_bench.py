"""What planning costs PostgreSQL's keyword statements, kind by kind.

    python -m bench.keyword_plans_bench [--facts 100000] [--queries 60] [--home DIR]
    python -m bench.keyword_plans_bench --database-url URL   # a server of your own
    python -m bench.keyword_plans_bench --smoke               # seconds: what `make test` runs

Reads hybrid's keyword half of search_bench's questions (whole sentences) in search_bench's
memory (built when --home does not hold it), as its subject `agent` (50 policy lines), and
keeps every keyword statement the half ran: a word's walk, a common word's blocks and the
walk below them, the count of a rare word's holders, the rules asked of their ids. Then
runs each kept statement again, prepared on one connection with the walks' work_mem, on a
plan made for its words (force_custom_plan) and on one plan for any (force_generic_plan),
the two in turns, and prints each kind's p50 / p90 both ways beside the way the code runs
it (PostgresKeywords.matches: generic for the blocks and the ids, custom for the rest),
and the keyword half's own p50 as the code runs it. The rows a statement returns are the
same on either plan; only the time differs (docs/postgresql.md, "One plan for the ways
chosen beforehand").
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import event

from app.db.dialects import postgresql as pg
from app.runtime import open_runtime
from app.services import search as search_service
from app.usecases.memory import Memory
from bench import machine, search_bench
from bench.databases import Databases
from bench.search_bench import pct

SUBJECT = "agent"
# Which kind a kept statement is, by what its text holds (the first kind whose marks it
# holds all of).
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("blocks", ("regconfig, 'b'",)),
    ("walk below the blocks", ("below0",)),
    ("walk", ("AS term, t0.id",)),
    ("count of holders", ("AS term, h0.id",)),
    ("rules of the ids", ("= ANY (%(ids)s", "length(facts.content)")),
)
# The plan each kind runs on in PostgresKeywords.matches.
THE_CODES = {"blocks": "generic", "rules of the ids": "generic"}
MODES = {"custom": pg._CUSTOM_PLAN, "generic": pg._GENERIC_PLAN}
WARM = 6  # runs of each statement before timing: psycopg prepares it on its 5th


def kind_of(sql: str) -> str | None:
    return next((kind for kind, marks in KINDS if all(m in sql for m in marks)), None)


def keyword_halves(rt: Any, questions: list[str]) -> tuple[list[tuple[str, Any]], list[float]]:
    """Each question's keyword half as hybrid reads it: the keyword statements it ran, and
    its time (seconds)."""
    kept: list[tuple[str, Any]] = []
    seconds: list[float] = []

    def keep(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if kind_of(sql):
            kept.append((sql, params))

    memory = Memory(rt)
    for run, q in enumerate([*questions, *questions]):  # the second time prepared
        query = search_service.prepare(q=q, embedder=None, mode="keyword", limit=10)
        query = dataclasses.replace(query, mode="hybrid")
        if run == len(questions):
            event.listen(rt.engine, "before_cursor_execute", keep)
        with memory.transaction(SUBJECT) as (conn, ctx):
            started = time.perf_counter()
            search_service.keyword_half(conn, ctx, query)
            if run >= len(questions):
                seconds.append(time.perf_counter() - started)
    event.remove(rt.engine, "before_cursor_execute", keep)
    return kept, seconds


def timed(rt: Any, kept: list[tuple[str, Any]], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Each kept statement run again on one connection, on each plan in turns."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    raw = rt.engine.raw_connection()
    try:
        driver = raw.driver_connection
        for round_ in range(rounds + 1):
            modes = list(MODES) if round_ % 2 == 0 else list(reversed(MODES))
            for mode in modes:
                for sql, params in kept:
                    with driver.transaction():
                        driver.execute(
                            f"SELECT set_config('work_mem', '64kB', true), {MODES[mode]}"
                        )
                        for _ in range(WARM if round_ == 0 else 1):
                            started = time.perf_counter()
                            driver.execute(sql, params, prepare=True).fetchall()
                            took = time.perf_counter() - started
                    if round_:
                        out[kind_of(sql) or ""][mode].append(took)
    finally:
        raw.close()
    return out


def print_table(size: int, questions: int, half: list[float], out: dict[str, Any]) -> None:
    print(
        f"\nkeyword statements of hybrid's keyword half: {size} facts, {questions} questions, "
        f"subject `{SUBJECT}` (50 policy lines); p50 / p90 ms a statement, prepared\n"
    )
    print("| kind | statements | a plan for its words | one plan for any | the code's |")
    print("|---|---|---|---|---|")
    for kind, _ in KINDS:
        if kind not in out:
            continue
        custom, generic = out[kind]["custom"], out[kind]["generic"]
        print(
            f"| {kind} | {len(custom)} | {pct(custom, 0.5):.2f} / {pct(custom, 0.9):.2f} "
            f"| {pct(generic, 0.5):.2f} / {pct(generic, 0.9):.2f} "
            f"| {THE_CODES.get(kind, 'custom')} |"
        )
    print(
        f"\nthe keyword half as the code reads it: p50 {statistics.median(half) * 1000:.2f} ms, "
        f"p90 {pct(half, 0.9):.2f} ms ({len(half)} questions)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each statement")
    parser.add_argument(
        "--unique", type=int, help="sentences embedded for real (search_bench's default)"
    )
    parser.add_argument("--home", type=Path, help="keep the memory (and pgdata) here")
    parser.add_argument("--database-url", help="a PostgreSQL server to use (bench/databases.py)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run, in seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.facts, args.queries, args.unique, args.rounds = 1500, 4, 120, 1
    machine.report_load()
    with tempfile.TemporaryDirectory() as tmp:
        _, questions, unique, vectors = search_bench.model_and_corpus(
            Path(tmp), args.unique, args.queries, args.facts, database="postgresql"
        )
        databases = Databases("postgresql", args.database_url, args.home)
        try:
            print(databases.describe())
            home = (args.home or Path(tmp)) / f"pg-m{args.facts}"
            url = databases.url(args.facts)
            search_bench.build(home, args.facts, unique, vectors, url)
            rt = open_runtime(search_bench.settings_for(home, url=url))
            try:
                kept, half = keyword_halves(rt, questions)
                print_table(args.facts, len(questions), half, timed(rt, kept, args.rounds))
            finally:
                rt.close()
        finally:
            databases.close()
    machine.report_load()


if __name__ == "__main__":
    main()
