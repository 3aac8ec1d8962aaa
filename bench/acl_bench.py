"""Cost of the compiled ACL fragment on the fact listing.

    python -m bench.acl_bench [--facts 10000] [--runs 300] [--explain] [--analyze] [--smoke]

Builds a memory of 10k facts over ~300 nodes with fact and path tags, and gives
the subject `bench` 50 read lines (its own and through a chain of roles and
`everyone`: node and subtree objects, tag objects, some denies). Then times the
query app.services.facts.list_facts runs (the first page of 50, newest first)
and a count of every current fact, each with the subject's read fragment and
with `WHERE true` in its place, and prints p50/p95 and their ratio. The ACL side
is timed as a request pays it (the policy version check, the subject's cached
fragment, SQLAlchemy's execution); the "SQL text only" rows send the compiled SQL
straight to SQLite.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, func, insert, select, true

from app.acl.enforcer import AccessControl
from app.db import migrate
from app.db.engine import make_engine, read_transaction, write_transaction
from app.db.tables import casbin_rule, fact_tags, facts, path_tags, paths
from app.services.context import Context
from app.services.facts import list_facts
from app.services.visibility import current_only
from bench import machine

SUBJECT = "bench"
OWNERS = (SUBJECT, "alice", "bob", "carol", "default")
TOPS = ("work", "personal", "projects", "secrets", "docs", "team", "archive", "notes")
PAGE = 50


def build_tree(rng: random.Random) -> list[str]:
    """8 top nodes, 6 children each, 5 grandchildren each, and some at depth 4: ~330."""
    nodes = []
    for top in TOPS:
        nodes.append(f"/{top}")
        for i in range(6):
            child = f"/{top}/c{i}"
            nodes.append(child)
            for j in range(5):
                grand = f"{child}/g{j}"
                nodes.append(grand)
                if rng.random() < 0.2:
                    nodes.append(f"{grand}/leaf")
    return nodes


def fact_tag_draw(rng: random.Random) -> dict[str, str]:
    tags = {}
    roll = rng.random()
    if roll < 0.1:
        tags["visibility"] = "public"
    elif roll < 0.2:
        tags["visibility"] = "private"
    if rng.random() < 0.3:
        tags["team"] = rng.choice("abcd")
    if rng.random() < 0.2:
        tags["project"] = f"p{rng.randrange(20)}"
    return tags


def path_tag_draw(rng: random.Random, node: str) -> dict[str, str]:
    if rng.random() > 0.15:
        return {}
    tags = {rng.choice(("team", "project", "visibility")): ""}
    for key in tags:
        tags[key] = {
            "team": rng.choice("abcd"),
            "project": f"p{rng.randrange(20)}",
            "visibility": rng.choice(("public", "internal")),
        }[key]
    if rng.random() < 0.2:
        tags["owner"] = rng.choice(OWNERS)  # never reaches a fact
    return tags


def policy_lines(rng: random.Random, nodes: list[str]) -> list[str]:
    """50 read lines that apply to `bench`, plus other subjects' and write lines."""
    depth2 = [n for n in nodes if n.count("/") == 2]
    depth3 = [n for n in nodes if n.count("/") >= 3]
    lines = [
        "g, bench, team-a",
        "g, team-a, staff",  # a chain of two
        "g, bench, reviewers",
        "g, everyone, readers",
    ]
    allow_nodes = rng.sample(depth3, 17)
    allow_trees = rng.sample(depth2, 14)
    read: list[tuple[str, str, str]] = []
    read += [(SUBJECT, f"path:{node}", "allow") for node in allow_nodes[:12]]
    read += [
        (rng.choice((SUBJECT, "team-a", "staff")), f"path:{node}/*", "allow")
        for node in allow_trees[:10]
    ]
    read += [
        (SUBJECT, "tag:owner=bench", "allow"),
        ("team-a", "tag:team=a", "allow"),
        ("staff", "tag:team=b", "allow"),
        ("reviewers", "tag:visibility=internal", "allow"),
        ("readers", "path:/docs/*", "allow"),
        ("staff", "path:/team/*", "allow"),
    ]
    read += [
        (rng.choice((SUBJECT, "team-a", "reviewers")), f"tag:project=p{number}", "allow")
        for number in rng.sample(range(20), 8)
    ]
    read += [
        (SUBJECT, "path:/secrets/*", "deny"),
        ("everyone", "tag:visibility=private", "deny"),
        ("team-a", "tag:project=p13", "deny"),
        ("staff", "path:/archive/*", "deny"),
    ]
    read += [(SUBJECT, f"path:{node}", "deny") for node in allow_nodes[12:]]
    read += [("reviewers", f"path:{node}/*", "deny") for node in allow_trees[10:]]
    # With the migration's `everyone` public line: 50 read lines for the subject.
    assert len(set(read)) == 49
    lines += [f"p, {sub}, {obj}, read, {eft}" for sub, obj, eft in read]
    # Noise: write lines, and other subjects' reads.
    lines += [f"p, bench, path:{n}/*, write, allow" for n in rng.sample(depth2, 5)]
    lines += [f"p, alice, path:{n}/*, read, allow" for n in rng.sample(depth2, 10)]
    return lines


def build(path: Path, n_facts: int, seed: int = 7, *, analyze: bool = False) -> Engine:
    rng = random.Random(seed)
    engine = make_engine(path)
    migrate.upgrade(engine, 16)
    nodes = build_tree(rng)
    with write_transaction(engine) as conn:
        ids = {"/": 1}
        for node in sorted(nodes, key=lambda p: p.count("/")):
            parent, name = node.rsplit("/", 1)
            ids[node] = conn.execute(
                insert(paths)
                .values(parent_id=ids[parent or "/"], name=name, path=node, created_at=0.0)
                .returning(paths.c.id)
            ).scalar_one()
        tag_rows = [
            {"path_id": ids[node], "key": k, "value": v}
            for node in nodes
            for k, v in path_tag_draw(rng, node).items()
        ]
        conn.execute(insert(path_tags), tag_rows)
        first = conn.execute(select(func.max(facts.c.id))).scalar_one() + 1
        fact_rows, own_rows = [], []
        for number in range(first, first + n_facts):
            owner = rng.choice(OWNERS)
            superseded = number > first and rng.random() < 0.05
            fact_rows.append(
                {
                    "id": number,
                    "path_id": ids[rng.choice(nodes)],
                    "content": f"fact {number}",
                    "owner": owner,
                    "supersedes_id": number - 1 if superseded else None,
                    "deleted_at": 1.0 if rng.random() < 0.02 else None,
                    "created_at": float(number),
                }
            )
            tags = {**fact_tag_draw(rng), "owner": owner}
            own_rows += [{"fact_id": number, "key": k, "value": v} for k, v in tags.items()]
        conn.execute(insert(facts), fact_rows)
        conn.execute(insert(fact_tags), own_rows)
        for line in policy_lines(rng, nodes):
            ptype, *values = [part.strip() for part in line.split(",")]
            row = dict(zip(("v0", "v1", "v2", "v3"), values, strict=False))
            conn.execute(insert(casbin_rule).values(ptype=ptype, **row))
    if analyze:
        # The memory itself never runs ANALYZE: off by default, to plan as it does.
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    return engine


def page_query(clause: ColumnElement[bool]) -> Any:
    """What list_facts runs for the first page, newest first (limit + 1 rows)."""
    return (
        select(facts.c.id).where(clause, current_only()).order_by(facts.c.id.desc()).limit(PAGE + 1)
    )


def count_query(clause: ColumnElement[bool]) -> Any:
    return select(func.count()).select_from(facts).where(clause, current_only())


def timed(
    base: Callable[[], object], acl: Callable[[], object], runs: int
) -> tuple[list[float], list[float]]:
    """Milliseconds per run of each, taken in turns so that other load hits both alike."""
    for _ in range(max(5, runs // 20)):
        base()
        acl()
    out: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for run, times in ((base, out[0]), (acl, out[1])):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1000)
    return out


def p50_p95(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[94]


def bench(engine: Engine, runs: int, explain: bool) -> list[tuple[str, list[float], list[float]]]:
    control = AccessControl(engine)
    results = []
    with read_transaction(engine) as conn:
        access = control.for_subject(conn, SUBJECT)
        rules = access.rules("read")
        acl = access.read_clause(facts.c.id, facts.c.path_id)
        visible = conn.execute(count_query(acl)).scalar_one()
        total = conn.execute(count_query(true())).scalar_one()
        print(f"{len(rules)} read rules apply to {SUBJECT}; it sees {visible} of {total} facts")
        if explain:
            explain_plans(conn, acl)

        def with_acl(make: Callable[[ColumnElement[bool]], Any]) -> Callable[[], object]:
            # As a request does it: the subject's access, its fragment, the query.
            def run() -> object:
                clause = control.for_subject(conn, SUBJECT).read_clause(facts.c.id, facts.c.path_id)
                return conn.execute(make(clause)).all()

            return run

        def without(make: Callable[[ColumnElement[bool]], Any]) -> Callable[[], object]:
            return lambda: conn.execute(make(true())).all()

        def sql_only(clause: ColumnElement[bool], make: Callable[..., Any]) -> Callable[[], object]:
            sql = str(make(clause).compile(conn, compile_kwargs={"literal_binds": True}))
            return lambda: conn.exec_driver_sql(sql).all()

        def listing(subject: str) -> Callable[[], object]:
            # The whole service call a client pays for: query, hydration of 50 facts.
            # `default` reads path:/* with no deny, whose fragment compiles to TRUE.
            def run() -> object:
                ctx = Context(subject, control.for_subject(conn, subject))
                return list_facts(conn, ctx, limit=PAGE)

            return run

        results.append(
            (
                "list_facts page of 50 (service, hydrated)",
                *timed(listing("default"), listing(SUBJECT), runs),
            )
        )
        for name, make in (("first page of 50", page_query), ("count visible", count_query)):
            results.append((name, *timed(without(make), with_acl(make), runs)))
            # The same SQL text straight to SQLite: SQLAlchemy's share left out.
            text_only = timed(sql_only(true(), make), sql_only(acl, make), runs)
            results.append((f"{name}, SQL text only", *text_only))
    return results


def explain_plans(conn: Connection, acl: ColumnElement[bool]) -> None:
    for name, stmt in (("page", page_query(acl)), ("count", count_query(acl))):
        sql = stmt.compile(conn, compile_kwargs={"literal_binds": True})
        print(f"-- EXPLAIN QUERY PLAN ({name})")
        for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"):
            print("   ", row[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--explain", action="store_true", help="print the query plans")
    parser.add_argument("--analyze", action="store_true", help="run ANALYZE after the build")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args()
    if args.smoke:
        args.facts, args.runs = 1000, 20
    machine.report_load()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        engine = build(Path(tmp) / "memory.db", args.facts, analyze=args.analyze)
        print(f"built {args.facts} facts in {time.perf_counter() - start:.1f} s")
        try:
            results = bench(engine, args.runs, args.explain)
        finally:
            engine.dispose()
    print()
    machine.report_load()
    print(
        f"| query ({args.runs} runs) | no ACL p50 | p95 | ACL p50 | p95 | ratio p50 | ratio p95 |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, base, acl in results:
        b50, b95 = p50_p95(base)
        a50, a95 = p50_p95(acl)
        print(
            f"| {name} | {b50:.2f} ms | {b95:.2f} ms | {a50:.2f} ms | {a95:.2f} ms "
            f"| {a50 / b50:.2f}x | {a95 / b95:.2f}x |"
        )


if __name__ == "__main__":
    main()
