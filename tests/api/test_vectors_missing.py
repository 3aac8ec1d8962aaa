"""A PostgreSQL memory at the head revision whose vectors are not all there: what a
restore without pgvector leaves (pg_restore skips the extension, then facts_vec, its
keys and its HNSW index, and goes on).

Before, /readyz answered ready, and every store with a model and every search by
meaning was a 500 ("The server failed to handle the request.") with the driver's
traceback in the log; keyword search and stores without a model worked. Now /readyz
is a 503 naming what is missing and the way back (docs/postgresql.md, Backups), the
server says so once at start, those requests are 503 problems saying the same, and
keyword search still works. A missing HNSW index alone leaves every request working
(an exact scan): ready, the detail names it.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app import cli
from app.embeddings.fake import FakeEmbedder
from app.main import create_app
from app.runtime import Runtime, open_runtime
from app.settings import Settings
from app.usecases.memory import Memory
from tests.api.conftest import Auth, assert_problem
from tests.conftest import TEST_WIDTH, both_backends, make_settings
from tests.postgres import PostgresForTests

# Only PostgreSQL keeps its vectors in a table a restore can leave out.
backend = pytest.fixture(scope="module", params=["postgresql"])(both_backends)

DROPS = {
    "table": "DROP TABLE facts_vec",
    # DROP EXTENSION ... CASCADE takes facts_vec's vector column and its index with it.
    "extension": "DROP TABLE facts_vec; DROP EXTENSION vector CASCADE",
    "column": "DROP EXTENSION vector CASCADE; CREATE EXTENSION vector",
}
NAMED = {
    "table": "the vector table facts_vec is missing",
    "extension": "the pgvector extension (vector) is not installed",
    "column": "the vector table facts_vec has lost its vectors",
}
LEAKS = ("Traceback", "SELECT", "INSERT", "relation", "psycopg", "/tmp", "sqlalchemy")


def drop(rt: Runtime, what: str) -> None:
    with rt.engine.begin() as conn:
        conn.exec_driver_sql(DROPS[what])


def store(client: TestClient, auth: Auth, content: str) -> Any:
    return client.post(
        "/v1/facts", json={"path": "/notes", "content": content}, headers=auth("default")
    )


def search(client: TestClient, auth: Auth, mode: str, q: str = "apples") -> Any:
    return client.get("/v1/search", params={"q": q, "mode": mode}, headers=auth("default"))


def assert_unavailable(response: Any, named: str) -> None:
    body = assert_problem(response, 503)
    assert named in body["detail"] and "docs/postgresql.md" in body["detail"], body
    for leak in LEAKS:
        assert leak not in response.text, response.text


@pytest.mark.parametrize("what", list(DROPS))
def test_readyz_says_what_is_missing_and_how_to_put_it_back(
    what: str, client: TestClient, rt: Runtime
) -> None:
    assert client.get("/readyz").status_code == 200
    drop(rt, what)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["database"]["ok"] and body["migrations"]["ok"]  # at head, as it says
    assert body["index"]["ok"] is False
    detail = body["index"]["detail"]
    assert detail.startswith(NAMED[what]), detail
    assert "embornal memory reindex --rebuild" in detail and "docs/postgresql.md" in detail


@pytest.mark.parametrize("what", list(DROPS))
def test_searches_by_meaning_and_stores_that_embed_are_503s_keyword_search_works(
    what: str,
    client: TestClient,
    auth: Auth,
    rt: Runtime,
    fact_count: Callable[[], int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    assert store(client, auth, "green apples keep a month").status_code == 201
    drop(rt, what)
    facts = fact_count()
    caplog.clear()
    assert_unavailable(search(client, auth, "semantic"), NAMED[what])
    assert_unavailable(search(client, auth, "hybrid"), NAMED[what])
    assert_unavailable(store(client, auth, "red apples keep a week"), NAMED[what])
    assert fact_count() == facts  # the refused store wrote nothing
    # One warning line a request, never a traceback.
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    found = search(client, auth, "keyword")
    assert found.status_code == 200, found.text
    assert [r["fact"]["content"] for r in found.json()["results"]] == ["green apples keep a month"]
    rt.embedder = None  # a store without a model needs no vector: it waits for one
    assert store(client, auth, "apples waiting").status_code == 201


def test_a_missing_hnsw_index_alone_is_named_and_everything_works(
    client: TestClient, auth: Auth, rt: Runtime
) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    assert store(client, auth, "green apples keep a month").status_code == 201
    with rt.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX facts_vec_hnsw")
    response = client.get("/readyz")
    assert response.status_code == 200
    index = response.json()["index"]
    assert index["ok"] is True
    assert "no HNSW index (facts_vec_hnsw)" in index["detail"]
    assert "pg_restore --index=facts_vec_hnsw" in index["detail"]
    # An exact scan instead of the graph's walk: slower in a large memory, still right.
    assert store(client, auth, "red apples keep a week").status_code == 201
    for mode in ("semantic", "hybrid"):
        found = search(client, auth, mode)
        assert found.status_code == 200, found.text
        assert found.json()["results"]


@pytest.mark.parametrize("what", ["table", "extension"])
def test_the_way_back_the_detail_names_works_without_a_restart(
    what: str, client: TestClient, auth: Auth, rt: Runtime
) -> None:
    """CREATE EXTENSION (by an administrator) and `embornal memory reindex --rebuild`:
    the running server is ready again at its next request, and finds by meaning the
    facts stored before, now embedded again."""
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    assert store(client, auth, "green apples keep a month").status_code == 201
    drop(rt, what)
    # As a server started on the restored database: its connections never saw the
    # vector type. (Those of one running when the extension was dropped keep the old
    # type's id, and writes through them fail until a restart.)
    rt.engine.dispose()
    assert client.get("/readyz").status_code == 503
    with rt.engine.begin() as conn:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
    assert Memory(rt).reindex(rebuild=True) >= 1
    assert client.get("/readyz").json()["index"] == {"ok": True, "detail": "loaded"}
    found = search(client, auth, "semantic", "green apples keep a month")
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["fact"]["content"] == "green apples keep a month"


def test_serve_says_once_at_start_that_the_memory_is_not_ready(
    settings: Settings, rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    drop(rt, "table")
    seen: dict[str, Any] = {}

    def fake_run(app: FastAPI, **_options: Any) -> None:
        with TestClient(app) as served:
            seen["readyz"] = served.get("/readyz").status_code

    monkeypatch.setenv("EMBORNAL_HOME", str(settings.dirs.config_dir))
    monkeypatch.setenv("EMBORNAL_DATABASE__URL", str(settings.database.url))
    monkeypatch.setenv("EMBORNAL_EMBEDDING__MODEL", "none")
    monkeypatch.setenv("EMBORNAL_EMBEDDING__WIDTH", str(TEST_WIDTH))
    monkeypatch.setattr(cli.state, "settings", None)
    monkeypatch.setattr(uvicorn, "run", fake_run)
    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    result = CliRunner().invoke(cli.app, ["serve", "--port", str(port)])
    assert result.exit_code == 0, result.output
    assert result.output.count("not ready: the vector table facts_vec is missing") == 1
    assert seen["readyz"] == 503


# --- the restore the docs warn about -------------------------------------------


@pytest.fixture
def restorer(postgres: PostgresForTests) -> Iterator[str]:
    """A role that may make databases' tables but not the vector extension."""
    role = f"restorer_{os.getpid()}"
    admin = postgres.admin()
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
    yield role
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP ROLE IF EXISTS {role}")
    admin.dispose()


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    import pgserver

    # The wheel's tools match its server; a machine's older ones would refuse it.
    tool = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
    return subprocess.run([str(tool), *args], capture_output=True, text=True, check=False)


@pytest.mark.slow  # pg_dump and pg_restore
def test_a_restore_by_a_role_that_may_not_create_the_extension_is_not_ready(
    rt: Runtime, tmp_path: Path, postgres: PostgresForTests, restorer: str
) -> None:
    archive = tmp_path / "memory.dump"
    host = f"--host={rt.engine.url.query['host']}"
    dumped = run_tool(
        "pg_dump",
        "--format=custom",
        f"--file={archive}",
        host,
        "--username=postgres",
        str(rt.engine.url.database),
    )
    assert dumped.returncode == 0, dumped.stderr
    target = postgres.new_empty_database()
    admin = postgres.admin()
    with admin.connect() as conn:
        conn.exec_driver_sql(f"ALTER DATABASE {target.database} OWNER TO {restorer}")
    admin.dispose()
    try:
        restored = run_tool(
            "pg_restore",
            host,
            f"--username={restorer}",
            "--no-owner",
            f"--dbname={target.database}",
            str(archive),
        )
        # It goes on past each statement that fails, and says so at the end (exit 1).
        assert "Must be superuser to create this extension" in restored.stderr
        assert "warning: errors ignored on restore" in restored.stderr
        assert restored.returncode == 1
        settings = make_settings(
            tmp_path / "restored", database={"url": target.render_as_string(False)}
        )
        runtime = open_runtime(settings)
        try:
            missing = runtime.vectors_missing
            assert missing is not None and not missing.usable
            with TestClient(create_app(settings, runtime=runtime)) as client:
                response = client.get("/readyz")
            assert response.status_code == 503
            assert response.json()["migrations"]["ok"] is True  # at head, as it says
            assert response.json()["index"]["detail"].startswith(NAMED["extension"])
        finally:
            runtime.close()
    finally:
        postgres.drop_database(target)
