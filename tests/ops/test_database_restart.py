"""PostgreSQL goes away and comes back under load (issue 21, item 1).

A real `embornal serve` on a PostgreSQL of its own (pgserver, so stopping it touches
no other test), writers and readers running throughout. The database is stopped
(fast shutdown, then in a second round immediate: no checkpoint, crash recovery on
start) and started again. While it is gone every request is a 503 problem with
Retry-After, none waits past the statement timeout plus a margin, /readyz says not
ready and why; once it is back the same process serves again (no restart), and every
fact that got a 201 is in the database exactly once.

The figures (time to the first 503, time to the first 201 after the start, requests
refused) are printed: `pytest -s`.
"""

from __future__ import annotations

import itertools
import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

from tests.ops.live import WORDS, LiveServer, wait_for

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

WRITERS, READERS = 8, 4  # as issue 21 asks
STATEMENT_MS = 3000
MARGIN = 3.0  # seconds a request may take over the statement timeout on a busy machine
DOWN_REQUESTS = 30  # refused requests to see in each outage before starting again
ACKS_PER_PHASE = 20
PAUSE = 0.05  # a client's pause after a 503, so an outage is not a busy loop
TERMINATE = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE application_name = 'embornal' AND pid <> pg_backend_pid()"
)


class OwnPostgres:
    """A PostgreSQL for one test: started, stopped (fast or immediate), started again."""

    def __init__(self) -> None:
        import pgserver

        self.server: Any = pgserver.get_server(
            Path(tempfile.mkdtemp(prefix="embornal-restart-")), cleanup_mode="delete"
        )
        socket_dir = self.server.get_uri().rpartition("host=")[2]
        base = URL.create("postgresql+psycopg", username="postgres", database="postgres")
        self.base = base.update_query_dict({"host": socket_dir})
        admin = create_engine(self.base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql("CREATE DATABASE embornal")
        admin.dispose()
        self.url = self.base.set(database="embornal")

    def stop(self, mode: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        with self.server._lock:
            self.server.ensure_postgres_running()

    def close(self) -> None:
        self.server.cleanup()


@dataclass
class Seen:
    phase: str  # the phase at the start of the request, "+" the one at its end if other
    kind: str
    status: int
    seconds: float
    retry_after: str | None
    problem: bool
    at: float


@dataclass
class Traffic:
    """Writers and readers on one server until stopped; what each request got."""

    server: LiveServer
    phase: str = "up"
    seen: list[Seen] = field(default_factory=list)
    acknowledged: dict[int, str] = field(default_factory=dict)
    transport_errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

    def _request(self, client: httpx.Client, kind: str, method: str, url: str, **kw: Any) -> Any:
        phase, started = self.phase, time.monotonic()
        try:
            response = client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            with self.lock:
                self.transport_errors[f"{kind}: {type(exc).__name__}"] += 1
            return None
        ended = time.monotonic()
        label = phase if self.phase == phase else f"{phase}+{self.phase}"
        with self.lock:
            self.seen.append(
                Seen(
                    label,
                    kind,
                    response.status_code,
                    ended - started,
                    response.headers.get("Retry-After"),
                    response.headers.get("content-type", "").startswith("application/problem+json"),
                    ended,
                )
            )
        if response.status_code == 503:
            time.sleep(PAUSE)
        return response

    def writer(self, w: int) -> None:
        rng = random.Random(w)
        with self.server.client(timeout=30) as client:
            for i in itertools.count():
                if self.done.is_set():
                    return
                content = f"restart fact w{w}n{i} {' '.join(rng.sample(WORDS, 3))}"
                body = {"path": f"/restart/w{w}", "content": content}
                response = self._request(client, "store", "POST", "/v1/facts", json=body)
                if response is not None and response.status_code == 201:
                    with self.lock:
                        self.acknowledged[response.json()["id"]] = content

    def reader(self, r: int) -> None:
        rng = random.Random(100 + r)
        with self.server.client(timeout=30) as client:
            for i in itertools.count():
                if self.done.is_set():
                    return
                if i % 2:
                    params = {"q": rng.choice(WORDS), "mode": "keyword", "limit": 5}
                    self._request(client, "search", "GET", "/v1/search", params=params)
                else:
                    self._request(client, "list", "GET", "/v1/facts", params={"under": "/restart"})

    def acks(self) -> int:
        with self.lock:
            return len(self.acknowledged)

    def count(self, phase: str, status: int | None = None) -> int:
        with self.lock:
            return sum(
                1 for s in self.seen if s.phase == phase and (status is None or s.status == status)
            )

    def first(self, phase: str, status: int, after: float) -> float | None:
        with self.lock:
            times = [s.at for s in self.seen if s.status == status and s.at >= after]
        return min(times) - after if times else None


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    pg = OwnPostgres()
    try:
        yield pg
    finally:
        pg.close()


def test_the_database_stops_and_starts_under_load(
    own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    extra = {
        "EMBORNAL_DATABASE__URL": own_postgres.url.render_as_string(hide_password=False),
        "EMBORNAL_DATABASE__STATEMENT_TIMEOUT_MS": str(STATEMENT_MS),
    }
    server = LiveServer(tmp_path / "home", "none", extra).start()
    traffic = Traffic(server)
    threads = [threading.Thread(target=traffic.writer, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=traffic.reader, args=(r,)) for r in range(READERS)]
    figures: list[str] = []
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: traffic.acks() >= ACKS_PER_PHASE, "stores before the first stop")
        with httpx.Client(base_url=server.base_url, timeout=30) as plain:
            for mode in ("fast", "immediate"):
                down = f"down-{mode}"
                stopping = time.monotonic()
                traffic.phase = f"stopping-{mode}"  # served or refused, either may be
                own_postgres.stop(mode)
                traffic.phase = down
                wait_for(lambda d=down: traffic.count(d) >= DOWN_REQUESTS, f"requests in {down}")
                ready = plain.get("/readyz")
                assert ready.status_code == 503, ready.text
                body = ready.json()
                assert body["status"] == "unready" and body["database"]["ok"] is False
                assert "cannot be reached" in body["database"]["detail"], body
                traffic.phase = f"starting-{mode}"
                own_postgres.start()
                up = f"up-after-{mode}"
                traffic.phase = up
                started = time.monotonic()
                acks = traffic.acks()
                wait_for(lambda: plain.get("/readyz").status_code == 200, "ready again", 15)
                ready_after = time.monotonic() - started
                wait_for(lambda a=acks: traffic.acks() >= a + ACKS_PER_PHASE, f"stores in {up}")
                first_503 = traffic.first(down, 503, stopping)
                first_201 = traffic.first(up, 201, started)
                figures.append(
                    f"{mode}: first 503 {first_503:.2f} s after the stop began, "
                    f"{traffic.count(down, 503)} refused while down, "
                    f"ready {ready_after:.2f} s and first 201 {first_201:.2f} s after the start"
                )
                assert first_201 is not None and first_201 < 10, figures
            # The connections cut under their transactions, three times, the server up.
            admin = create_engine(own_postgres.url, isolation_level="AUTOCOMMIT")
            try:
                for _ in range(3):
                    acks = traffic.acks()
                    traffic.phase = "terminated"
                    with admin.connect() as conn:
                        cut = conn.exec_driver_sql(TERMINATE).scalars().all()
                    # False is a backend that ended between the scan and the signal (the
                    # pool closing a connection cut in the round before): not a failure.
                    assert any(cut), "no connection of the server's was cut"
                    wait_for(lambda a=acks: traffic.acks() >= a + ACKS_PER_PHASE, "stores again")
            finally:
                admin.dispose()
            figures.append(f"terminated: {traffic.count('terminated', 503)} requests refused")
    finally:
        traffic.done.set()
        for thread in threads:
            thread.join(timeout=60)
        server.stop()
    print("\n[restart]", "; ".join(figures), f"; {len(traffic.acknowledged)} acknowledged")

    assert not traffic.transport_errors, traffic.transport_errors
    statuses = Counter((s.kind, s.status) for s in traffic.seen)
    assert {status for _, status in statuses} <= {200, 201, 503}, statuses  # never a 500
    for s in traffic.seen:
        assert s.seconds < STATEMENT_MS / 1000 + MARGIN, s
        if s.status == 503:
            assert s.problem and s.retry_after and int(s.retry_after) >= 1, s
        if s.phase.startswith("down") and "+" not in s.phase:
            assert s.status == 503, s  # nothing is served from a database that is gone
    logs = server.logs()
    assert "Traceback" not in logs, server.first_traceback()

    # Every acknowledged fact is there exactly once, read from the database itself.
    engine = create_engine(own_postgres.url)
    with engine.connect() as conn:
        sql = "SELECT content, count(*) FROM facts WHERE content LIKE :p GROUP BY content"
        rows = conn.execute(text(sql), {"p": "restart fact %"}).all()
    engine.dispose()
    stored = {str(content): int(n) for content, n in rows}
    for fact_id, content in traffic.acknowledged.items():
        assert stored.get(content) == 1, (fact_id, content, stored.get(content))
