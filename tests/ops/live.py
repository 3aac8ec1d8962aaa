"""A real `embornal serve` in a subprocess, and the concurrent load the ops tests put on it.

Shared by tests/ops (correctness under load and faults) and bench/load_bench.py
(the same load, longer, as a table). Everything listens on 127.0.0.1 only; the
server's home (config, memory.db, key, weights) is a temporary directory given
as EMBORNAL_HOME, so nothing of the user's is read or written.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 384  # minilm-l6's; `none` takes it too, so one home can switch between them
POLL = 0.02  # seconds between two looks at something another process does
CLIENT_TIMEOUT = 60.0  # above the server's 30 s busy timeout: a lock wait shows as its 5xx
WORDS = (  # noqa: SIM905 - a sentence reads better than twenty quoted words
    "river mountain copper violin harbor lantern orchard glacier meadow compass "
    "falcon ember quartz willow thunder saffron canyon beacon tundra marble"
).split()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_env(home: Path, model: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every embornal process on `home`: same key, same memory.
    `extra` adds EMBORNAL_* settings (replicas: one database URL, one key file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env |= {
        "HOME": str(home),  # no ~/.embornal of the user's is looked at
        "EMBORNAL_HOME": str(home),
        "EMBORNAL_EMBEDDING__MODEL": model,
        "EMBORNAL_EMBEDDING__WIDTH": str(WIDTH),
        "EMBORNAL_EMBEDDING__DOWNLOAD": "false",  # minilm-l6 comes from installed packages
    }
    return env | (extra or {})


def run_cli(
    home: Path,
    model: str,
    *args: str,
    timeout: float = 60,
    extra: dict[str, str] | None = None,
    root: Path = ROOT,
) -> str:
    """Run `embornal ARGS` on `home` and return its stdout; fail on a non-zero exit.
    `root`: the checkout whose code runs (another commit's, for a bench comparing them)."""
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=root,
        env=cli_env(home, model, extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"embornal {' '.join(args)}: {result.stdout}\n{result.stderr}")
    return result.stdout


class LiveServer:
    """`embornal serve --port P` on `home`, started, stopped, killed and started again."""

    def __init__(
        self,
        home: Path,
        model: str = "minilm-l6",
        extra_env: dict[str, str] | None = None,
        root: Path = ROOT,
    ) -> None:
        self.home = home
        self.model = model
        self.extra_env = extra_env or {}
        self.root = root  # the checkout whose code serves (see run_cli)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.starts = 0
        self._log: IO[bytes] | None = None
        home.mkdir(parents=True, exist_ok=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.home / "memory.db"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def log_path(self, start: int | None = None) -> Path:
        return self.home / f"server-{self.starts if start is None else start}.log"

    def start(self, ready_timeout: float = 60.0) -> LiveServer:
        """Start on a fresh port, wait for /readyz, and mint a token the first time."""
        assert self.proc is None, "already running"
        self.starts += 1
        self.port = free_port()
        # A file, not a pipe: nobody reads a pipe while the test runs, and a full pipe
        # would block the server's logging (and so every request) mid-test.
        self._log = self.log_path().open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port)],
            cwd=self.root,
            env=cli_env(self.home, self.model, self.extra_env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(ready_timeout)
        if not self.token:
            # After the first start: the server made the key; the CLI reads the same file.
            self.token = run_cli(
                self.home,
                self.model,
                "token",
                "issue",
                "--subject",
                "default",
                extra=self.extra_env,
                root=self.root,
            )
            self.token = self.token.strip()
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=2) as client:
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    raise AssertionError(
                        f"the server exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    response = client.get("/readyz")
                    if response.status_code == 200:
                        body = response.json()
                        wanted = self.model != "none"
                        if body["model"]["loaded"] == wanted:
                            return
                        raise AssertionError(f"ready with the wrong model state: {body}")
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise AssertionError(f"not ready within {timeout} s:\n{self.log_tail()}")
                time.sleep(POLL)

    def stop(self) -> None:
        """Terminate (uvicorn shuts down cleanly), then kill if it lingers."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.proc = None
        self._close_log()

    def kill9(self) -> None:
        """SIGKILL: no shutdown handler, no final checkpoint, requests cut off mid-way."""
        assert self.proc is not None and self.proc.poll() is None, "not running"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def client(self, timeout: float = CLIENT_TIMEOUT) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    def logs(self) -> str:
        return "".join(
            self.log_path(n).read_text(errors="replace")
            for n in range(1, self.starts + 1)
            if self.log_path(n).exists()
        )

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    def first_traceback(self, lines: int = 60) -> str | None:
        """The first traceback the server logged, from the lines just before it (its
        request) to the exception it ends with, or None. A log's tail shows the requests
        that came after it. A traceback longer than `lines` keeps its last frames: the
        frames nearest the exception, and the exception itself, are what explain it."""
        logged = self.logs().splitlines()
        starts = [n for n, line in enumerate(logged) if line.startswith("Traceback")]
        if not starts:
            return None
        start = starts[0]
        end = start + 1  # the exception's line: the first one not indented after the frames
        while end < len(logged) and (logged[end][:1].isspace() or not logged[end]):
            end += 1
        head = logged[max(0, start - 3) : start + 1]
        frames = logged[start + 1 : end + 1]
        if len(frames) > lines:
            frames = [f"  ... {len(frames) - lines} lines of outer frames ...", *frames[-lines:]]
        return "\n".join(head + frames)


def wait_for(condition: Any, what: str, timeout: float = 30.0) -> None:
    """Look at `condition` every POLL seconds until it holds; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(POLL)


# --- figures -----------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def error_kind(response: httpx.Response) -> str:
    text = response.text
    if "database is locked" in text or "database table is locked" in text:
        return "database is locked"
    return f"HTTP {response.status_code}"


@dataclass
class LoadResult:
    writers: int
    readers: int
    write_seconds: float = 0.0
    write_latencies: list[float] = field(default_factory=list)
    read_latencies: list[float] = field(default_factory=list)
    # id -> content of every fact whose store the server acknowledged with a 201.
    acknowledged: dict[int, str] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    reads_by_kind: Counter[str] = field(default_factory=Counter)

    @property
    def writes_per_second(self) -> float:
        return len(self.write_latencies) / self.write_seconds if self.write_seconds else 0.0

    @property
    def reads_per_second(self) -> float:
        return len(self.read_latencies) / self.write_seconds if self.write_seconds else 0.0

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    def summary(self) -> str:
        ms = 1000.0
        return (
            f"{self.writers} writers + {self.readers} readers: "
            f"{len(self.write_latencies)} writes in {self.write_seconds:.1f} s = "
            f"{self.writes_per_second:.1f} writes/s, write p50 "
            f"{percentile(self.write_latencies, 50) * ms:.0f} ms p95 "
            f"{percentile(self.write_latencies, 95) * ms:.0f} ms; "
            f"{len(self.read_latencies)} reads = {self.reads_per_second:.1f} reads/s, read p95 "
            f"{percentile(self.read_latencies, 95) * ms:.0f} ms; "
            f"errors {dict(self.errors) or 0}, 5xx {self.server_errors}"
        )


def run_load(
    server: LiveServer,
    *,
    writers: int = 8,
    readers: int = 8,
    facts_per_writer: int | None = 40,
    duration: float | None = None,
    tag: str = "load",
) -> LoadResult:
    """Writers POST /v1/facts one fact at a time (each `facts_per_writer`, or for
    `duration` seconds); readers loop over recalls, peeks and searches until the
    last writer is done. Returns what every request got; raises nothing for a
    failed request (the caller asserts on the result)."""
    assert facts_per_writer is not None or duration is not None
    result = LoadResult(writers=writers, readers=readers)
    lock = threading.Lock()
    ids: list[int] = []  # acknowledged ids, for the readers to pick from
    writers_done = threading.Event()
    barrier = threading.Barrier(writers + readers + 1)

    def record(kind: str, response: httpx.Response | None, exc: Exception | None) -> None:
        with lock:
            if exc is not None:
                result.errors[f"{kind}: {type(exc).__name__}"] += 1
                return
            assert response is not None
            result.statuses[response.status_code] += 1
            if not response.is_success:
                result.errors[f"{kind}: {error_kind(response)}"] += 1

    def writer(w: int) -> None:
        rng = random.Random(w)
        with server.client() as client:
            barrier.wait()
            stop_at = time.perf_counter() + (duration if duration is not None else math.inf)
            for i in itertools.count():
                if facts_per_writer is not None and i >= facts_per_writer:
                    break
                if time.perf_counter() >= stop_at:
                    break
                words = " ".join(rng.sample(WORDS, 4))
                content = f"{tag} fact w{w}n{i} {words}"
                body = {"path": f"/{tag}/w{w}", "content": content, "tags": {"writer": f"w{w}"}}
                started = time.perf_counter()
                try:
                    response = client.post("/v1/facts", json=body)
                except httpx.HTTPError as exc:
                    record("write", None, exc)
                    continue
                elapsed = time.perf_counter() - started
                record("write", response, None)
                if response.status_code == 201:
                    fact = response.json()
                    with lock:
                        result.write_latencies.append(elapsed)
                        result.acknowledged[fact["id"]] = content
                        ids.append(fact["id"])

    def reader(r: int) -> None:
        rng = random.Random(1000 + r)
        with server.client() as client:
            barrier.wait()
            for i in itertools.count(r):
                if writers_done.is_set():
                    break
                kind = ("recall", "peek", "keyword", "search")[i % 4]
                if kind in ("recall", "peek") and not ids:
                    kind = "keyword"
                if kind in ("recall", "peek"):
                    url = f"/v1/facts/{rng.choice(ids)}"
                    params: dict[str, Any] = {"peek": "true"} if kind == "peek" else {}
                else:
                    url = "/v1/search"
                    params = {"q": rng.choice(WORDS), "limit": 5}
                    if kind == "keyword":
                        params["mode"] = "keyword"
                started = time.perf_counter()
                try:
                    response = client.get(url, params=params)
                except httpx.HTTPError as exc:
                    record("read", None, exc)
                    continue
                elapsed = time.perf_counter() - started
                record("read", response, None)
                if response.status_code == 200:
                    with lock:
                        result.read_latencies.append(elapsed)
                        result.reads_by_kind[kind] += 1

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(writers)]
    reading = [threading.Thread(target=reader, args=(r,), daemon=True) for r in range(readers)]
    for thread in threads + reading:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    result.write_seconds = time.perf_counter() - started
    writers_done.set()
    for thread in reading:
        thread.join()
    return result


# --- the database, read directly ---------------------------------------------


@dataclass
class DbState:
    integrity: list[str]
    fts_problem: str | None  # FTS5's check, including agreement with the facts table
    embedded_without_vec: set[int]  # facts with an embedding but no facts_vec row
    vec_without_embedding: set[int]  # facts_vec rows of no fact, or of one without embedding
    facts: dict[int, str]  # id -> content
    embedded: set[int]  # ids of the facts with an embedding

    def assert_consistent(self) -> None:
        assert self.integrity == ["ok"], self.integrity
        assert self.fts_problem is None, self.fts_problem
        assert not self.embedded_without_vec, sorted(self.embedded_without_vec)[:20]
        assert not self.vec_without_embedding, sorted(self.vec_without_embedding)[:20]


def inspect_database(path: Path) -> DbState:
    """Open memory.db (or a copy) as the app does and check it from the inside."""
    from sqlalchemy.exc import DBAPIError

    from app.db.engine import make_engine, read_transaction, write_transaction

    engine = make_engine(path)
    try:
        with read_transaction(engine) as conn:
            integrity = [row[0] for row in conn.exec_driver_sql("PRAGMA integrity_check")]
            facts = {
                int(row[0]): str(row[1])
                for row in conn.exec_driver_sql("SELECT id, content FROM facts")
            }
            embedded = {
                int(row[0])
                for row in conn.exec_driver_sql("SELECT id FROM facts WHERE embedding IS NOT NULL")
            }
            vec = {int(row[0]) for row in conn.exec_driver_sql("SELECT fact_id FROM facts_vec")}
        fts_problem = None
        try:
            # The check is an INSERT, so a write transaction. rank = 1 also compares the
            # index with the external content table (plain 'integrity-check' does not).
            with write_transaction(engine) as conn:
                conn.exec_driver_sql("INSERT INTO facts_fts(facts_fts) VALUES('integrity-check')")
                conn.exec_driver_sql(
                    "INSERT INTO facts_fts(facts_fts, rank) VALUES('integrity-check', 1)"
                )
        except DBAPIError as exc:
            fts_problem = str(exc.orig)
    finally:
        engine.dispose()
    return DbState(
        integrity=integrity,
        fts_problem=fts_problem,
        embedded_without_vec=embedded - vec,
        vec_without_embedding=vec - embedded,
        facts=facts,
        embedded=embedded,
    )


def fts_counts(path: Path, queries: list[str]) -> dict[str, int]:
    """How many facts the keyword index finds for each FTS5 query."""
    from app.db.engine import make_engine, read_transaction

    engine = make_engine(path)
    sql = "SELECT count(*) FROM facts_fts WHERE facts_fts MATCH ?"
    try:
        with read_transaction(engine) as conn:
            return {q: int(conn.exec_driver_sql(sql, (q,)).scalar_one()) for q in queries}
    finally:
        engine.dispose()


def tag_groups(path: Path, key: str) -> dict[str, set[int]]:
    """value -> ids of the facts whose own tag `key` has that value."""
    from app.db.engine import make_engine, read_transaction

    engine = make_engine(path)
    sql = "SELECT value, fact_id FROM fact_tags WHERE key = ?"
    groups: dict[str, set[int]] = {}
    try:
        with read_transaction(engine) as conn:
            for value, fact_id in conn.exec_driver_sql(sql, (key,)):
                groups.setdefault(str(value), set()).add(int(fact_id))
    finally:
        engine.dispose()
    return groups


def list_all(client: httpx.Client, **params: Any) -> dict[int, str]:
    """id -> content of every fact GET /v1/facts lists with these filters (all pages)."""
    found: dict[int, str] = {}
    cursor: str | None = None
    while True:
        query = {**params, "limit": 100} | ({"cursor": cursor} if cursor else {})
        response = client.get("/v1/facts", params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        found |= {fact["id"]: fact["content"] for fact in page["facts"]}
        cursor = page["next_cursor"]
        if not cursor:
            return found
