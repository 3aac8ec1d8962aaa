"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from tests.api.conftest import Auth, assert_problem
from tests.conftest import TEST_WIDTH


def test_healthz_needs_no_token(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_without_a_model_says_why(client: TestClient, rt: Runtime) -> None:
    rt.model_problem = "the model files are missing; run `embornal model pull`"
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["database"]["ok"] and body["migrations"]["ok"]
    assert body["model"]["loaded"] is False
    assert body["model"]["reason"] == rt.model_problem
    assert body["index"] == {"ok": True, "detail": "loaded"}


def test_readiness_tells_no_one_how_much_is_stored(
    client: TestClient, auth: Auth, rt: Runtime
) -> None:
    """No token is needed for /readyz: polling it must not show when, or how much, anyone
    stores (counts are for /metrics, role metrics or admin)."""
    before = client.get("/readyz").json()
    rt.embedder = FakeEmbedder(TEST_WIDTH)  # stores now add vectors to the index too
    for n in range(3):
        stored = client.post(
            "/v1/facts", json={"path": "/p", "content": f"fact {n}"}, headers=auth("default")
        )
        assert stored.status_code == 201, stored.text
    rt.embedder = None
    client.post("/v1/facts", json={"path": "/p", "content": "waits"}, headers=auth("default"))
    after = client.get("/readyz").json()
    assert after == before
    assert set(after) == {"status", "database", "migrations", "model", "index"}


def test_not_ready_when_migrations_are_behind(client: TestClient, rt: Runtime) -> None:
    with rt.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'old'"))
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["migrations"]["ok"] is False


def test_metrics_needs_a_token_of_the_metrics_or_admin_role(client: TestClient, auth: Auth) -> None:
    unauthenticated = assert_problem(client.get("/metrics"), 401)
    assert "facts" not in str(unauthenticated)
    # Any other subject learns nothing: the gauges count facts it may not read.
    refused = client.get("/metrics", headers=auth("carol"))
    assert "metrics" in assert_problem(refused, 403)["detail"]
    assert "embornal_" not in refused.text
    response = client.get("/metrics", headers=auth("default"))  # default is in admin
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")


def test_a_scraper_gets_the_metrics_role_which_grants_nothing_else(
    client: TestClient, auth: Auth, add_policy
) -> None:
    """An admin can download every fact (export, backup): a scraper's token must not be
    one. The role `metrics` opens /metrics and nothing else."""
    secret = client.post(
        "/v1/facts", json={"path": "/private", "content": "the vault code"}, headers=auth("default")
    )
    assert secret.status_code == 201
    # A subject merely named like the role is not in it.
    assert_problem(client.get("/metrics", headers=auth("metrics")), 403)
    assert_problem(client.get("/metrics", headers=auth("prometheus")), 403)
    add_policy("g, prometheus, metrics")
    scraper = auth("prometheus")
    assert client.get("/metrics", headers=scraper).status_code == 200
    assert_problem(client.get(f"/v1/facts/{secret.json()['id']}", headers=scraper), 404)
    listed = client.get("/v1/facts", headers=scraper).json()["facts"]
    assert {f["path"] for f in listed} == {"/memory"}  # what everyone reads: public facts
    assert_problem(client.get("/v1/policies", headers=scraper), 403)
    assert client.get("/v1/whoami", headers=scraper).json()["roles"] == ["everyone", "metrics"]
    # And now that it is a role, no token may carry its name.
    assert_problem(client.get("/metrics", headers=auth("metrics")), 401)


def test_openapi_document_is_public(client: TestClient) -> None:
    assert client.get("/openapi.json").status_code == 200
