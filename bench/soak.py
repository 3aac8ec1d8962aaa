"""A day of traffic in minutes: a mixed load on a real `embornal serve`, then checks.

    python -m bench.soak [--backend sqlite|postgresql] [--requests 20000] [--threads 4]
    python -m bench.soak --smoke    # 300 requests on SQLite: checks that it works

Starts the server on 127.0.0.1 in a temporary EMBORNAL_HOME (its own key and memory;
on PostgreSQL a database on a pgserver of its own, see bench/databases.py), then
--threads clients share a fixed count of requests, each verb drawn by weight:
stores, keyword searches, recalls, supersedes, deletes, path-tag changes and policy
changes (one add, then its removal). Each client works under its own path and its
own policy subject, so the state every acknowledged request leaves is known.

Prints throughput, p50/p99 per verb, errors by status, and the server's resident
memory, open file descriptors and (SQLite) WAL size at the start, middle and end: a
leak shows as growth. Then checks, through the API, that every acknowledged store is
there exactly once with its content, every delete holds (404, and deleted_at with
include_deleted), every supersede is recorded, every path's tags and every policy
line are as the last acknowledged change left them. Exits 1 on any error or failed
check.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import machine
from bench.databases import Databases
from tests.ops.live import WORDS, LiveServer, list_all, percentile

# Relative weights of the verbs (a store-heavy agent that reads back what it wrote).
WEIGHTS = {
    "store": 30,
    "search": 20,
    "recall": 15,
    "supersede": 10,
    "delete": 8,
    "tag": 10,
    "policy": 7,
}
EXPECTED = {"store": 201, "search": 200, "recall": 200, "supersede": 201, "delete": 204}
EXPECTED |= {"tag": 200, "policy add": 201, "policy remove": 204}


@dataclass
class Client:
    """One client's view: what its acknowledged requests left in the memory."""

    number: int
    live: dict[int, str] = field(default_factory=dict)  # id -> content, current facts
    deleted: set[int] = field(default_factory=set)
    superseded: dict[int, int] = field(default_factory=dict)  # old id -> new id
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # path -> its own tags
    nodes: set[str] = field(default_factory=set)  # paths it has stored to
    policy_present: bool = False
    # What a request that failed may or may not have changed: left out of the checks.
    unsure: set[int] = field(default_factory=set)
    unsure_nodes: set[str] = field(default_factory=set)
    unsure_policy: bool = False

    @property
    def root(self) -> str:
        return f"/soak/c{self.number}"

    @property
    def policy_line(self) -> str:
        return f"p, soaker{self.number}, path:{self.root}/*, read, allow"


@dataclass
class Run:
    server: LiveServer
    requests: int
    threads: int
    seed: int = 7
    issued: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    clients: list[Client] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    halfway: threading.Event = field(default_factory=threading.Event)
    seconds: float = 0.0

    def ticket(self) -> bool:
        with self.lock:
            if self.issued >= self.requests:
                return False
            self.issued += 1
            if self.issued >= self.requests // 2:
                self.halfway.set()
            return True

    def call(self, http: httpx.Client, verb: str, method: str, url: str, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            response = http.request(method, url, **kw)
        except httpx.HTTPError as exc:
            with self.lock:
                self.errors[f"{verb}: {type(exc).__name__}"] += 1
            return None
        elapsed = time.perf_counter() - started
        with self.lock:
            self.latencies[verb.split()[0]].append(elapsed)
            if response.status_code != EXPECTED[verb]:
                self.errors[f"{verb}: HTTP {response.status_code}"] += 1
        return response if response.status_code == EXPECTED[verb] else None

    def work(self, me: Client) -> None:
        rng = random.Random(self.seed * 1000 + me.number)
        verbs, weights = list(WEIGHTS), list(WEIGHTS.values())
        with self.server.client(timeout=60) as http:
            n = 0
            while self.ticket():
                n += 1
                verb = rng.choices(verbs, weights)[0]
                sure = sorted(set(me.live) - me.unsure)
                if verb in ("recall", "supersede", "delete", "tag") and not sure:
                    verb = "store"
                path = f"{me.root}/n{n % 7}"
                content = f"soak c{me.number} n{n} {' '.join(rng.sample(WORDS, 4))}"
                if verb == "store":
                    body = {"path": path, "content": content}
                    if (r := self.call(http, verb, "POST", "/v1/facts", json=body)) is not None:
                        me.live[r.json()["id"]] = content
                        me.nodes.add(path)
                elif verb == "search":
                    params = {"q": rng.choice(WORDS), "mode": "keyword", "limit": 10}
                    self.call(http, verb, "GET", "/v1/search", params=params)
                elif verb == "recall":
                    fact_id = rng.choice(sure)
                    r = self.call(http, verb, "GET", f"/v1/facts/{fact_id}")
                    if r is not None and r.json()["content"] != me.live[fact_id]:
                        with self.lock:
                            self.errors["recall: wrong content"] += 1
                elif verb == "supersede":
                    old = rng.choice(sure)
                    body = {"path": path, "content": content, "supersedes_id": old}
                    r = self.call(http, verb, "POST", "/v1/facts", json=body)
                    if r is None:
                        me.unsure.add(old)
                    else:
                        new = r.json()["id"]
                        del me.live[old]
                        me.superseded[old] = new
                        me.live[new] = content
                        me.nodes.add(path)
                elif verb == "delete":
                    fact_id = rng.choice(sure)
                    if self.call(http, verb, "DELETE", f"/v1/facts/{fact_id}") is None:
                        me.unsure.add(fact_id)
                    else:
                        del me.live[fact_id]
                        me.deleted.add(fact_id)
                elif verb == "tag":
                    node = rng.choice(sorted(me.nodes))
                    tags = {"color": rng.choice(WORDS)}
                    url = f"/v1/paths{node}/tags"
                    if self.call(http, verb, "PUT", url, json=tags) is None:
                        me.unsure_nodes.add(node)
                    else:
                        me.tags[node] = tags
                else:
                    body = {"line": me.policy_line}
                    if me.policy_present:
                        done = self.call(http, "policy remove", "DELETE", "/v1/policies", json=body)
                    else:
                        done = self.call(http, "policy add", "POST", "/v1/policies", json=body)
                    if done is None:
                        me.unsure_policy = True
                    else:
                        me.policy_present = not me.policy_present

    def go(self) -> list[dict[str, float]]:
        """Run the load; the server's figures at the start, the middle and the end."""
        self.clients = [Client(n) for n in range(self.threads)]
        figures = [server_figures(self.server)]
        workers = [threading.Thread(target=self.work, args=(c,)) for c in self.clients]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        self.halfway.wait()
        figures.append(server_figures(self.server))
        for worker in workers:
            worker.join()
        self.seconds = time.perf_counter() - started
        figures.append(server_figures(self.server))
        return figures


def server_figures(server: LiveServer) -> dict[str, float]:
    """The server process's resident memory (MB), open descriptors and WAL size (MB)."""
    assert server.proc is not None
    pid = server.proc.pid
    with open(f"/proc/{pid}/status") as status:
        rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    wal = Path(f"{server.db_path}-wal")  # none on PostgreSQL: its WAL is the server's
    return {
        "rss_mb": rss_kb / 1024,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "wal_mb": wal.stat().st_size / 2**20 if wal.exists() else -1.0,
    }


def check(server: LiveServer, clients: list[Client]) -> list[str]:
    """What the memory holds against what was acknowledged; each failure, one line."""
    failures: list[str] = []
    with server.client(timeout=60) as http:
        policies = {p["line"] for p in http.get("/v1/policies").json()["policies"]}
        for c in clients:
            listed = list_all(http, under=c.root)
            expected = {i: text for i, text in c.live.items() if i not in c.unsure}
            for fact_id, content in expected.items():
                if listed.get(fact_id) != content:
                    failures.append(f"c{c.number}: acknowledged fact {fact_id} not listed")
            extra = set(listed) - set(c.live) - c.unsure
            if extra:
                failures.append(f"c{c.number}: listed but not current: {sorted(extra)[:5]}")
            contents = Counter(listed.values())
            if any(n > 1 for n in contents.values()):
                failures.append(f"c{c.number}: a fact is listed twice")
            for fact_id in c.deleted:
                if http.get(f"/v1/facts/{fact_id}", params={"peek": "true"}).status_code != 404:
                    failures.append(f"c{c.number}: deleted fact {fact_id} still readable")
                kept = http.get(f"/v1/facts/{fact_id}", params={"include_deleted": "true"})
                if kept.status_code != 200 or not kept.json()["deleted_at"]:
                    failures.append(f"c{c.number}: deleted fact {fact_id} lost its record")
            for old, new in c.superseded.items():
                fact = http.get(f"/v1/facts/{old}", params={"peek": "true"})
                if fact.status_code != 200 or fact.json()["superseded_by_id"] != new:
                    failures.append(f"c{c.number}: supersede {old} -> {new} not recorded")
            for node, tags in c.tags.items():
                if node in c.unsure_nodes:
                    continue
                got = http.get(f"/v1/paths{node}")
                if got.status_code != 200 or got.json()["tags"] != tags:
                    failures.append(f"c{c.number}: tags of {node} are not {tags}")
            if not c.unsure_policy and (c.policy_line in policies) != c.policy_present:
                failures.append(f"c{c.number}: policy line present={not c.policy_present}")
    return failures


def table(run: Run, figures: list[dict[str, float]], failures: list[str]) -> str:
    ms = 1000.0
    total = sum(len(v) for v in run.latencies.values())
    rows = [
        ("threads / requests", f"{run.threads} / {run.requests}"),
        ("duration", f"{run.seconds:.1f} s"),
        ("throughput", f"{total / run.seconds:.1f} requests/s" if run.seconds else "-"),
    ]
    for verb in WEIGHTS:
        values = run.latencies.get(verb, [])
        rows.append(
            (
                f"{verb} p50 / p99",
                f"{percentile(values, 50) * ms:.1f} / {percentile(values, 99) * ms:.1f} ms "
                f"({len(values)})",
            )
        )
    if run.errors:
        rows += [(f"error: {kind}", str(n)) for kind, n in sorted(run.errors.items())]
    else:
        rows.append(("errors", "none"))
    rss = " / ".join(f"{f['rss_mb']:.0f}" for f in figures)
    rows.append(("server RSS start / middle / end", f"{rss} MB"))
    rows.append(("open fds start / middle / end", " / ".join(f"{f['fds']:.0f}" for f in figures)))
    if all(f["wal_mb"] >= 0 for f in figures):
        wal = " / ".join(f"{f['wal_mb']:.1f}" for f in figures)
        rows.append(("memory.db-wal start / middle / end", f"{wal} MB"))
    kept = sum(len(c.live) for c in run.clients)
    deleted = sum(len(c.deleted) for c in run.clients)
    rows.append(("facts current / deleted at the end", f"{kept} / {deleted}"))
    rows.append(("checks", "all hold" if not failures else f"{len(failures)} FAILED"))
    return "\n".join(["| measure | value |", "|---|---|"] + [f"| {n} | {v} |" for n, v in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--model", default="none", help="none (keyword search) or minilm-l6")
    parser.add_argument("--smoke", action="store_true", help="300 requests: checks that it works")
    args = parser.parse_args(argv)
    if args.smoke:
        args.requests, args.threads = 300, 3
    machine.report_load()
    databases = Databases(args.backend)
    with tempfile.TemporaryDirectory(prefix="embornal-soak-") as tmp:
        extra = {}
        if databases.postgres:
            extra["EMBORNAL_DATABASE__URL"] = str(databases.url(0))
        print(databases.describe())
        server = LiveServer(Path(tmp) / "home", args.model, extra)
        try:
            server.start()
            run = Run(server, args.requests, args.threads)
            figures = run.go()
            failures = check(server, run.clients)
            traceback = "Traceback" in server.logs()
        finally:
            server.stop()
            databases.close()
    machine.report_load()
    print(table(run, figures, failures))
    for failure in failures[:20]:
        print(f"FAILED: {failure}")
    if traceback:
        print("FAILED: a traceback in the server log")
    return 0 if not run.errors and not failures and not traceback else 1


if __name__ == "__main__":
    sys.exit(main())
