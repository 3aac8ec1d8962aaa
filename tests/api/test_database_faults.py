"""Database faults are problems a client can act on, not 500s (app.db.faults).

In process, on the per-test memory: a SQLite writer held past the busy timeout, a
PostgreSQL statement past statement_timeout_ms, a connection cut under a transaction
(pg_terminate_backend), idle pooled connections cut, and a pool with no connection
free. Each is a 503 problem with Retry-After and a detail naming the cause, within a
bounded time, and the next request succeeds on the same app. A database that stops
and starts again, and a disk that fills, are in tests/ops/test_database_faults.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlean
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text

from app.runtime import Runtime
from app.settings import Settings
from tests.api.conftest import Auth, assert_problem
from tests.postgres import PostgresForTests

BUSY_MS = 300
STATEMENT_MS = 1500  # long enough for the cut test to find the waiting store first
MARGIN = 3.0  # seconds over the configured bound a 503 may take on a loaded machine
POLL = 0.02
# Each fault belongs to one backend: the test runs there (the API suite's fixture would
# run it on both).
SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
POSTGRES = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


@pytest.fixture
def settings(home: Path, fresh_memory: Callable[[Path], Settings]) -> Settings:
    base = fresh_memory(home)
    database = base.database.model_copy(
        update={"busy_timeout_ms": BUSY_MS, "statement_timeout_ms": STATEMENT_MS}
    )
    return base.model_copy(update={"database": database})


def store(client: TestClient, auth: Auth, content: str) -> Any:
    return client.post(
        "/v1/facts", json={"path": "/faults", "content": content}, headers=auth("default")
    )


def assert_retry_problem(response: Any, cause: str) -> dict[str, Any]:
    body = assert_problem(response, 503)
    assert int(response.headers["Retry-After"]) >= 1
    assert cause in body["detail"], body
    for leak in ("Traceback", "SELECT", "INSERT", "psycopg", "sqlite", "/tmp"):
        assert leak not in response.text, response.text
    return body


def facts_with(rt: Runtime, content: str) -> int:
    with rt.engine.connect() as conn:
        sql = text("SELECT count(*) FROM facts WHERE content = :c")
        return int(conn.execute(sql, {"c": content}).scalar_one())


# --- SQLite ------------------------------------------------------------------


@SQLITE
def test_sqlite_writer_past_the_busy_timeout_is_a_503(
    client: TestClient, auth: Auth, rt: Runtime, settings: Settings
) -> None:
    holder = sqlean.connect(str(settings.database_path), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
        started = time.monotonic()
        response = store(client, auth, "waits for the lock")
        elapsed = time.monotonic() - started
        assert_retry_problem(response, "busy timeout")
        assert elapsed < BUSY_MS / 1000 * 2 + MARGIN  # the writer queue's wait + BEGIN's
        # Readers are not held up by a writer (WAL).
        assert client.get("/v1/facts", headers=auth("default")).status_code == 200
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert facts_with(rt, "waits for the lock") == 0
    assert store(client, auth, "after the lock").status_code == 201


# --- PostgreSQL --------------------------------------------------------------


@pytest.fixture
def pg_admin(request: pytest.FixtureRequest, rt: Runtime) -> Iterator[Engine]:
    """An autocommit engine on the test's own database, outside the app's pool."""
    postgres: PostgresForTests = request.getfixturevalue("postgres")
    assert rt.engine.url.database
    admin = create_engine(postgres.url(rt.engine.url.database), isolation_level="AUTOCOMMIT")
    yield admin
    admin.dispose()


def app_backends(admin: Engine, *, waiting: bool = False) -> list[int]:
    """The pids of the app's connections to this database (those waiting on a lock)."""
    sql = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'embornal' "
        "AND datname = current_database()" + (" AND wait_event_type = 'Lock'" if waiting else "")
    )
    with admin.connect() as conn:
        return [int(pid) for pid in conn.exec_driver_sql(sql).scalars()]


@POSTGRES
def test_a_statement_past_the_statement_timeout_is_a_503_naming_the_timeout(
    pg_admin: Engine, client: TestClient, auth: Auth, rt: Runtime
) -> None:
    assert store(client, auth, "warms the pool").status_code == 201
    with pg_admin.connect() as locker:
        locker.exec_driver_sql("BEGIN")
        locker.exec_driver_sql("LOCK TABLE facts IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        response = store(client, auth, "waits past the timeout")
        elapsed = time.monotonic() - started
        locker.exec_driver_sql("ROLLBACK")
    assert_retry_problem(response, "did not answer in time")
    assert "statement_timeout_ms" in response.json()["detail"]
    assert STATEMENT_MS / 1000 <= elapsed < STATEMENT_MS / 1000 + MARGIN
    before = set(app_backends(pg_admin))
    # The connection is usable afterwards: the next store succeeds on it, not on a new one.
    assert store(client, auth, "after the timeout").status_code == 201
    assert set(app_backends(pg_admin)) == before
    assert facts_with(rt, "waits past the timeout") == 0
    assert facts_with(rt, "after the timeout") == 1


def cut_while_waiting(pg_admin: Engine, request: Callable[[], Any]) -> tuple[Any, float]:
    """`request`'s response, and how long it took, when its connection is cut while it
    waits on a lock on facts (held by another connection, released after)."""
    answer: dict[str, Any] = {}

    def blocked() -> None:
        started = time.monotonic()
        answer["response"] = request()
        answer["elapsed"] = time.monotonic() - started

    with pg_admin.connect() as locker:
        locker.exec_driver_sql("BEGIN")
        locker.exec_driver_sql("LOCK TABLE facts IN ACCESS EXCLUSIVE MODE")
        thread = threading.Thread(target=blocked)
        thread.start()
        deadline = time.monotonic() + 10
        while not (waiting := app_backends(pg_admin, waiting=True)):
            assert time.monotonic() < deadline, "the request never waited on the lock"
            time.sleep(POLL)
        with pg_admin.connect() as killer:
            killer.execute(text("SELECT pg_terminate_backend(:p)"), {"p": waiting[0]})
        thread.join(timeout=10)
        locker.exec_driver_sql("ROLLBACK")
    assert not thread.is_alive()
    return answer["response"], answer["elapsed"]


@POSTGRES
def test_a_connection_cut_under_a_transaction_is_a_503_and_the_next_request_serves(
    pg_admin: Engine, client: TestClient, auth: Auth, rt: Runtime
) -> None:
    assert store(client, auth, "warms the pool").status_code == 201
    response, elapsed = cut_while_waiting(
        pg_admin, lambda: store(client, auth, "cut mid-transaction")
    )
    assert_retry_problem(response, "cannot be reached")
    assert elapsed < 10
    assert facts_with(rt, "cut mid-transaction") == 0
    assert store(client, auth, "after the cut").status_code == 201


@POSTGRES
def test_a_connection_cut_under_a_keyword_search_is_a_503_not_a_second_error(
    pg_admin: Engine, client: TestClient, auth: Auth
) -> None:
    """The keyword walk sets and resets its planner settings around its statement; a
    connection cut under the statement is the fault the answer names (a 503), not the
    reset's error on the dead transaction (a 500, the connection dropped)."""
    assert store(client, auth, "a harbor to search for").status_code == 201

    def search() -> Any:
        params = {"q": "harbor", "mode": "keyword"}
        return client.get("/v1/search", params=params, headers=auth("default"))

    response, _ = cut_while_waiting(pg_admin, search)
    assert_retry_problem(response, "cannot be reached")
    found = search()
    assert found.status_code == 200 and found.json()["results"]


@POSTGRES
def test_idle_pooled_connections_cut_are_replaced_without_an_error(
    pg_admin: Engine, client: TestClient, auth: Auth
) -> None:
    """pre-ping: a connection the server ended while it sat in the pool is tested on
    checkout and replaced, so the request that draws it never sees the cut."""
    assert store(client, auth, "warms the pool").status_code == 201
    cut = app_backends(pg_admin)
    assert cut
    with pg_admin.connect() as killer:
        for pid in cut:
            killer.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    assert store(client, auth, "after the idle cut").status_code == 201
    assert client.get("/readyz").status_code == 200
    assert not set(cut) & set(app_backends(pg_admin))


@POSTGRES
def test_no_pooled_connection_free_within_the_wait_is_a_503(
    pg_admin: Engine, client: TestClient, auth: Auth, rt: Runtime
) -> None:
    pool: Any = rt.engine.pool
    held = [rt.engine.connect() for _ in range(pool.size() + pool._max_overflow)]
    try:
        started = time.monotonic()
        response = client.get("/v1/facts", headers=auth("default"))
        elapsed = time.monotonic() - started
        assert_retry_problem(response, "no database connection came free")
        assert elapsed < pool.timeout() + MARGIN
    finally:
        for conn in held:
            conn.close()
    assert client.get("/v1/facts", headers=auth("default")).status_code == 200
