"""Two `embornal serve` processes on one PostgreSQL behave as one service.

Each replica has its own home (its own process state: enforcer, caches) and shares
with the other only what a deployment shares: the database URL and the token key.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.ops.live import WORDS, LiveServer, list_all, run_cli, wait_for

pytestmark = pytest.mark.timeout(240)

WRITERS, READERS, FACTS_PER_WRITER = 16, 8, 12


# One pair for the module's tests (each works under its own path): starting two
# servers, the first migrating a new database, is most of each test's time.
@pytest.fixture(scope="module")
def replicas(
    postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, LiveServer]]:
    tmp_path = tmp_path_factory.mktemp("replicas")
    url = postgres.new_empty_database()
    key = tmp_path / "jwt-secret"
    key.write_text("replicas-share-this-key-" + "x" * 40)
    key.chmod(0o600)
    extra = {
        "EMBORNAL_DATABASE__URL": url.render_as_string(hide_password=False),
        "EMBORNAL_AUTH__SECRET_FILE": str(key),
    }
    servers = [LiveServer(tmp_path / f"replica{n}", "none", extra) for n in (1, 2)]
    try:
        # The first migrates the new database; the second finds it at head.
        for server in servers:
            server.start()
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()
        postgres.drop_database(url)


def test_writers_and_readers_on_both_replicas(replicas: tuple[LiveServer, LiveServer]) -> None:
    """16 writers and 8 readers spread over both: no 5xx, every acknowledged fact is
    there afterwards, and a fact acknowledged by one is read through the other at once."""
    servers = replicas
    lock = threading.Lock()
    acknowledged: dict[int, str] = {}
    statuses: Counter[int] = Counter()
    stale: list[int] = []  # acknowledged by one replica, not found through the other
    writers_done = threading.Event()
    barrier = threading.Barrier(WRITERS + READERS)
    fresh: list[tuple[int, int]] = []  # (id, index of the replica that stored it)

    def writer(w: int) -> None:
        rng = random.Random(w)
        with servers[w % 2].client() as client:
            barrier.wait()
            for i in range(FACTS_PER_WRITER):
                content = f"replica fact w{w}n{i} {' '.join(rng.sample(WORDS, 3))}"
                response = client.post("/v1/facts", json={"path": f"/rep/w{w}", "content": content})
                with lock:
                    statuses[response.status_code] += 1
                    if response.status_code == 201:
                        fact_id = response.json()["id"]
                        acknowledged[fact_id] = content
                        fresh.append((fact_id, w % 2))

    def reader(r: int) -> None:
        rng = random.Random(100 + r)
        clients = [server.client() for server in servers]
        try:
            barrier.wait()
            for i in itertools.count():
                if writers_done.is_set():
                    return
                with lock:
                    picked = fresh[-1] if fresh and i % 2 == 0 else None
                if picked is not None:
                    fact_id, stored_by = picked
                    # Through the replica that did not store it.
                    response = clients[1 - stored_by].get(f"/v1/facts/{fact_id}")
                    if response.status_code == 404:
                        stale.append(fact_id)
                else:
                    response = clients[r % 2].get(
                        "/v1/search", params={"q": rng.choice(WORDS), "mode": "keyword"}
                    )
                with lock:
                    statuses[response.status_code] += 1
        finally:
            for client in clients:
                client.close()

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    readers = [threading.Thread(target=reader, args=(r,)) for r in range(READERS)]
    for thread in writers + readers:
        thread.start()
    for thread in writers:
        thread.join()
    writers_done.set()
    for thread in readers:
        thread.join()

    assert not [s for s in statuses if s >= 500], statuses
    assert set(statuses) <= {200, 201}, statuses
    assert len(acknowledged) == WRITERS * FACTS_PER_WRITER
    assert stale == []
    for server in servers:
        with server.client() as client:
            assert list_all(client, under="/rep") == acknowledged
        assert "Traceback" not in server.logs(), server.first_traceback()


def test_concurrent_supersedes_through_both_replicas_give_one_201(
    replicas: tuple[LiveServer, LiveServer],
) -> None:
    first, second = replicas
    with first.client() as client:
        old = client.post("/v1/facts", json={"path": "/race", "content": "v1"}).json()["id"]
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def supersede(n: int) -> None:
        with (first if n % 2 else second).client() as client:
            barrier.wait()
            body = {"path": "/race", "content": f"v2 from {n}", "supersedes_id": old}
            codes.append(client.post("/v1/facts", json=body).status_code)

    threads = [threading.Thread(target=supersede, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [201] + [409] * 7
    with second.client() as client:
        chain = client.get(f"/v1/facts/{old}/history").json()["facts"]
    assert len(chain) == 2


def test_a_policy_added_through_one_replica_is_enforced_by_the_other(
    replicas: tuple[LiveServer, LiveServer],
) -> None:
    first, second = replicas
    alice = run_cli(
        second.home, "none", "token", "issue", "--subject", "alice", extra=second.extra_env
    ).strip()
    as_alice = {"Authorization": f"Bearer {alice}"}
    with first.client() as client:
        fact_id = client.post("/v1/facts", json={"path": "/shared/x", "content": "s"}).json()["id"]
    with httpx.Client(base_url=second.base_url, headers=as_alice, timeout=30) as client:
        assert client.get(f"/v1/facts/{fact_id}").status_code == 404  # warms its enforcer
    with first.client() as client:
        line = "p, alice, path:/shared/*, read, allow"
        assert client.post("/v1/policies", json={"line": line}).status_code == 201
    with httpx.Client(base_url=second.base_url, headers=as_alice, timeout=30) as client:
        assert client.get(f"/v1/facts/{fact_id}").status_code == 200


def test_two_replicas_migrating_one_new_database_at_once(postgres) -> None:
    from app.db import migrate
    from app.db.engine import make_engine

    url = postgres.new_empty_database()
    engines = [make_engine(url) for _ in range(2)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def start(n: int) -> None:
        barrier.wait()
        try:
            migrate.upgrade(engines[n], 64)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        with engines[0].connect() as conn:
            assert migrate.current_revision(conn) == migrate.head_revision()
            assert migrate.stored_width(conn) == 64
    finally:
        for engine in engines:
            engine.dispose()
        postgres.drop_database(url)


def test_two_replicas_recording_the_model_of_one_new_database_at_once(postgres) -> None:
    """The CI failure of stop 24: both servers saw no model in meta, and the second
    INSERT broke meta's primary key. The second writer here waits on the first's
    uncommitted row, as it did then, and must end with the row, not an error."""
    from sqlalchemy import text

    from app.db import migrate
    from app.db.engine import make_engine, write_transaction

    url = postgres.new_database()
    engines = [make_engine(url) for _ in range(2)]
    errors: list[BaseException] = []
    try:
        with write_transaction(engines[0]) as first:
            migrate.record_model(first, "minilm-l6")
            second_pid: list[int] = []

            def second() -> None:
                try:
                    with write_transaction(engines[1]) as conn:
                        second_pid.append(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar())
                        migrate.record_model(conn, "minilm-l6")
                except BaseException as exc:  # surfaced below
                    errors.append(exc)

            thread = threading.Thread(target=second)
            thread.start()
            # Commit only once the second writer waits on our row's key.
            with engines[0].connect() as watcher:
                waiting = text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE pid = :pid AND wait_event_type = 'Lock'"
                )

                def second_waits() -> bool:
                    if not second_pid:
                        return False
                    seen = watcher.execute(waiting, {"pid": second_pid[0]}).scalar()
                    watcher.rollback()  # the next look takes a new snapshot
                    return bool(seen)

                wait_for(second_waits, "the second writer to wait on the first")
        thread.join(timeout=30)
        assert errors == []
        with engines[1].connect() as conn:
            assert migrate.stored_model(conn) == "minilm-l6"
    finally:
        for engine in engines:
            engine.dispose()
        postgres.drop_database(url)
