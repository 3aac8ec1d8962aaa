"""CORS for browser callers: off by default; on for the origins http.cors_origins lists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.runtime import Runtime
from app.settings import HttpSettings, Settings
from tests.api.conftest import Auth, assert_problem
from tests.conftest import FakeClock

LISTED = "https://app.example.org"
OTHER = "https://evil.example.org"


def preflight(client: TestClient, origin: str, method: str = "POST", headers: str = ""):
    asked = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        asked["Access-Control-Request-Headers"] = headers
    return client.options("/v1/facts", headers=asked)


@pytest.fixture
def cors_client(settings: Settings, rt: Runtime, clock: FakeClock) -> Iterator[TestClient]:
    http = HttpSettings(allowed_hosts=["testserver"], cors_origins=[LISTED])
    app = create_app(settings.model_copy(update={"http": http}), runtime=rt, clock=clock)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_a_listed_origin_may_call_with_a_bearer_token(cors_client: TestClient, auth: Auth) -> None:
    answer = preflight(cors_client, LISTED, headers="authorization, content-type")
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == LISTED
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert "authorization" in answer.headers["access-control-allow-headers"].lower()
    # Tokens, not cookies: credentials are never allowed across origins.
    assert "access-control-allow-credentials" not in answer.headers
    stored = cors_client.post(
        "/v1/facts",
        json={"path": "/web", "content": "stored from a page"},
        headers={**auth("default"), "Origin": LISTED},
    )
    assert stored.status_code == 201, stored.text
    assert stored.headers["access-control-allow-origin"] == LISTED
    assert "x-request-id" in stored.headers["access-control-expose-headers"].lower()


def test_another_origin_gets_no_allow_header(cors_client: TestClient, auth: Auth) -> None:
    answer = preflight(cors_client, OTHER, headers="authorization")
    body = assert_problem(answer, 400)
    assert "origin" in body["detail"] and "http.cors_origins" in body["detail"]
    assert "access-control-allow-origin" not in answer.headers
    read = cors_client.get("/v1/facts", headers={**auth("default"), "Origin": OTHER})
    assert read.status_code == 200  # the browser, not the server, withholds the answer
    assert "access-control-allow-origin" not in read.headers
    # A listed origin asking for a header the API does not read is refused too.
    odd = preflight(cors_client, LISTED, headers="x-custom")
    assert_problem(odd, 400)
    assert "access-control-allow-origin" not in odd.headers


def test_cors_is_off_by_default(client: TestClient, auth: Auth) -> None:
    for origin in (LISTED, OTHER):
        answer = preflight(client, origin, headers="authorization")
        assert "access-control-allow-origin" not in answer.headers
        assert answer.status_code == 405
        assert answer.headers["content-type"].startswith("application/problem+json")
        read = client.get("/v1/facts", headers={**auth("default"), "Origin": origin})
        assert read.status_code == 200
        assert "access-control-allow-origin" not in read.headers
