"""Server time of the console's pages at 10k and 100k facts.

    python -m bench.ui_bench [--facts 10000,100000] [--runs 30] [--home DIR]
    python -m bench.ui_bench --smoke          # seconds: what `make test` runs

Builds a memory per size (standard-library comments as text, 50 facts a node over
~20 top nodes, in batches of 1000 through the store service; vectors from the
deterministic fake embedder at 384-d, so the semantic column does real vector work
without a model run per fact), signs in through the console, and times each page
in-process (the app called over ASGI, no network): from the request to the last
byte of HTML, i.e. the use cases, the rules, the SQL and the template. Pages are
timed for `default` (admin: it sees every fact, the worst case for counts) and
for `agent`, who reads about half the memory through a few policy lines (the
compiled read fragment in every query). With --home the memories are kept and
reused by the next run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.auth.tokens import issue_token
from app.db.tables import facts
from app.dirs import Dirs
from app.embeddings.fake import FakeEmbedder
from app.main import create_app
from app.runtime import Runtime, open_runtime
from app.services import facts as fact_service
from app.services import policies as policy_service
from app.services.facts import NewFact
from app.settings import Settings
from app.usecases.memory import Memory
from bench import machine
from bench.corpus import sentences

WIDTH = 384
BATCH = 1000
TOPS = 20
AGENT_LINES = [
    # agent reads the even top nodes and everything public; writes its own corner.
    *(f"p, agent, path:/d{d}/*, read, allow" for d in range(0, TOPS, 2)),
    "p, agent, path:/agents/agent/*, write, allow",
    "p, agent, tag:secret=yes, read, deny",
]
QUERIES = ["return the value", "raise an error if the file is missing", "thread lock", "unicode"]


def settings_for(home: Path) -> Settings:
    return Settings(
        dirs=Dirs(home, home, home),
        embedding={"model": "none", "width": WIDTH, "download": False},
    )


def fact_count(rt: Runtime) -> int:
    with rt.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(facts)).scalar_one())


def build(rt: Runtime, size: int, texts: list[str]) -> float:
    """Fill the memory to `size` facts; returns the seconds it took (0 when kept)."""
    memory = Memory(rt)
    embedder = FakeEmbedder(WIDTH)
    have = fact_count(rt)
    started = time.perf_counter()
    if have <= 10:  # only the starter facts: a new memory
        with memory.transaction("default", write=True) as (conn, ctx):
            for line in AGENT_LINES:
                policy_service.add_policy(conn, ctx, line)
    for start in range(have, size, BATCH):
        stop = min(start + BATCH, size)
        items = []
        for k in range(start, stop):
            a, b = texts[k % len(texts)], texts[(k * 7 + 3) % len(texts)]
            text = a if k < len(texts) else f"{a} {b}"
            tags = {"topic": f"t{(k // 10) % 40}"}
            if k % 97 == 0:
                tags["secret"] = "yes"
            items.append(NewFact(f"/d{(k // 50) % TOPS}/s{(k // BATCH) % 10}", text, tags))
        vectors = embedder.embed_documents([item.content for item in items])
        blobs = [np.asarray(v, dtype="<f4").tobytes() for v in vectors]
        with memory.transaction("default", write=True) as (conn, ctx):
            checked = fact_service.validate_new_facts(items, rt.settings.limits)
            fact_service.store_facts(conn, ctx, checked, vectors=blobs)
    return time.perf_counter() - started if size > have else 0.0


def sign_in(client: TestClient, settings: Settings, subject: str) -> None:
    form = client.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, "no sign-in form"
    token = issue_token(settings, subject, dt.timedelta(hours=1))
    done = client.post(
        "/ui/login", data={"token": token, "csrf": csrf.group(1)}, follow_redirects=False
    )
    assert done.status_code == 303, done.text


def timed(get: Callable[[], object], runs: int) -> tuple[float, float]:
    get()  # warm: the subject's compiled fragment, statement caches, templates
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        response = get()
        samples.append((time.perf_counter() - started) * 1000)
        status = getattr(response, "status_code", 200)
        assert status == 200, (status, getattr(response, "text", "")[:300])
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95


def pages(fact_id: int) -> list[tuple[str, str, bool]]:
    """(name, url, admin only)."""
    q = QUERIES[0].replace(" ", "+")
    return [
        ("overview", "/ui", False),
        ("tree /", "/ui/paths/", False),
        ("tree node", "/ui/paths/d0/s0", False),
        ("fact", f"/ui/facts/{fact_id}", False),
        ("search (3 modes)", f"/ui/search?q={q}", False),
        ("search, filtered", f"/ui/search?q={q}&under=/d2&min_strength=0.0", False),
        ("policies + see as", "/ui/policies?see_subject=agent&see_path=/d0", True),
    ]


def measure(home: Path, size: int, runs: int, texts: list[str]) -> list[list[str]]:
    settings = settings_for(home)
    rt = open_runtime(settings)
    rt.embedder = FakeEmbedder(WIDTH)
    try:
        built = build(rt, size, texts)
        # Path tags above the timed node, so the tree page shows where each comes from.
        Memory(rt).set_path_tags("default", "/d0", {"team": "blue"})
        Memory(rt).set_path_tags("default", "/d0/s0", {"shelf": "top"})
        rt.load_vector_index()
        # A fact agent can read too (an even top node), near the middle of the memory.
        fact_id = size // 2 - (size // 2) % 100 + 1
        app = create_app(settings, runtime=rt)
        rows = []
        with TestClient(app) as admin, TestClient(app) as agent:
            sign_in(admin, settings, "default")
            sign_in(agent, settings, "agent")
            for name, url, admin_only in pages(fact_id):
                a50, a95 = timed(lambda url=url: admin.get(url), runs)
                if admin_only:
                    g = "—"
                else:
                    g50, g95 = timed(lambda url=url: agent.get(url), runs)
                    g = f"{g50:.1f} / {g95:.1f}"
                rows.append([f"{size:,}", name, f"{a50:.1f} / {a95:.1f}", g])
        if built:
            print(f"built {size:,} facts in {built:.1f} s", flush=True)
        return rows
    finally:
        rt.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", default="10000,100000", help="memory sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=30, help="timed requests per page")
    parser.add_argument("--home", type=Path, help="keep (and reuse) the memories here")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: checks that it works")
    args = parser.parse_args()
    sizes = [int(s) for s in args.facts.split(",") if s.strip()]
    runs = args.runs
    if args.smoke:
        sizes, runs = [300], 3
    texts = sentences(min(max(sizes), 60_000))
    with tempfile.TemporaryDirectory(prefix="embornal-ui-bench-") as scratch:
        root = args.home or Path(scratch)
        table = []
        for size in sizes:
            table += measure(root / f"m{size}", size, runs, texts)
    print(machine.load_line())
    print(f"server time per page in ms, p50 / p95 of {runs} requests (in-process, after one warm)")
    print()
    print("| facts | page | default (admin) | agent (half visible) |")
    print("|---|---|---|---|")
    for row in table:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
