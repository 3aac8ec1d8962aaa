"""Every error is an RFC 9457 problem, none leaks a trace, SQL or a path, and bad input
writes nothing."""

from __future__ import annotations

import datetime as dt
import json

import jwt
import pytest
from fastapi.testclient import TestClient

from app.auth.tokens import issue_token
from app.services import facts as fact_service
from app.settings import Settings
from tests.api.conftest import Auth, assert_problem

LIMIT = 1024 * 1024


def test_unknown_route_is_a_404_problem(client: TestClient, auth: Auth) -> None:
    assert_problem(client.get("/v1/nothing-here", headers=auth("default")), 404)
    assert_problem(client.get("/nothing"), 404)


def test_wrong_method_is_a_405_problem(client: TestClient, auth: Auth) -> None:
    response = client.put("/v1/facts", headers=auth("default"))
    assert_problem(response, 405)
    assert "allow" in response.headers


def test_unknown_field_is_a_422_naming_it(client: TestClient, auth: Auth, fact_count) -> None:
    before = fact_count()
    response = client.post(
        "/v1/facts", json={"path": "/a", "content": "x", "sneaky": 1}, headers=auth("default")
    )
    problem = assert_problem(response, 422)
    assert problem["errors"] == [
        {"loc": ["body", "sneaky"], "msg": "Extra inputs are not permitted"}
    ]
    assert fact_count() == before


@pytest.mark.parametrize("route", ["/v1/facts", "/v1/search"])
def test_a_limit_too_large_says_what_the_limit_is(
    client: TestClient, auth: Auth, route: str
) -> None:
    params = {"q": "x", "limit": 101} if route == "/v1/search" else {"limit": 101}
    problem = assert_problem(client.get(route, params=params, headers=auth("default")), 422)
    assert problem["detail"] == (
        "Invalid value for limit: Input should be less than or equal to 100."
    )


def test_validation_never_echoes_the_input(client: TestClient, auth: Auth) -> None:
    huge = "Z" * 200_000
    response = client.post(
        "/v1/facts", json={"path": "/a", "content": huge}, headers=auth("default")
    )
    assert_problem(response, 422)
    assert "ZZZZZZZZ" not in response.text
    response = client.post("/v1/facts", json={"path": huge, "content": 1}, headers=auth("default"))
    assert_problem(response, 422)
    assert "ZZZZZZZZ" not in response.text


def test_invalid_json_is_a_422_problem(client: TestClient, auth: Auth) -> None:
    response = client.post(
        "/v1/facts",
        content=b'{"path": "/a", "content": ',
        headers={**auth("default"), "Content-Type": "application/json"},
    )
    problem = assert_problem(response, 422)
    assert "JSON" in problem["detail"]


@pytest.mark.parametrize("body", [b"\xff\xfe{}", b"[" * 100_000], ids=["not-utf-8", "too-deep"])
def test_undecodable_json_is_the_same_422(client: TestClient, auth: Auth, body: bytes) -> None:
    # FastAPI's own answer was a bare 400, a status no operation declares.
    response = client.post(
        "/v1/facts", content=body, headers={**auth("default"), "Content-Type": "application/json"}
    )
    problem = assert_problem(response, 422)
    assert problem["errors"] == [{"loc": ["body"], "msg": "JSON decode error"}]


@pytest.mark.parametrize(
    ("url", "method", "body", "loc"),
    [
        ("/v1/facts", "POST", {"path": "/a", "content": "x\ud800"}, ["body", "content"]),
        (
            "/v1/facts",
            "POST",
            {"path": "/a", "content": "x", "tags": {"k": "\ud800"}},
            ["body", "tags"],
        ),
        ("/v1/paths/a/tags", "PUT", {"k": "v\ud800"}, ["body", "tags"]),
    ],
    ids=["content", "fact-tag", "path-tag"],
)
def test_a_lone_surrogate_is_a_422_not_a_500(
    client: TestClient, auth: Auth, fact_count, url: str, method: str, body: dict, loc: list
) -> None:
    """JSON can spell `"\\ud800"` and the parser lets it through; UTF-8 cannot hold it."""
    before = fact_count()
    response = client.request(
        method,
        url,
        content=json.dumps(body).encode(),  # ensure_ascii: the surrogate as a JSON escape
        headers={**auth("default"), "Content-Type": "application/json"},
    )
    problem = assert_problem(response, 422)
    assert problem["errors"][0]["loc"] == loc
    assert fact_count() == before


def test_a_value_of_the_wrong_json_type_is_not_coerced(client: TestClient, auth: Auth) -> None:
    response = client.post("/v1/search", json={"q": "x", "peek": 0}, headers=auth("default"))
    problem = assert_problem(response, 422)
    assert problem["errors"][0]["loc"] == ["body", "peek"]


def test_a_405_allows_every_method_of_the_resource(client: TestClient, auth: Auth) -> None:
    for method, url, allow in [
        ("OPTIONS", "/v1/facts/1", "GET, DELETE"),  # Starlette said `GET`
        ("GET", "/v1/facts/batch", "POST"),  # was a 422: `batch` is no fact id
        ("PATCH", "/v1/policies", "GET, POST, DELETE"),
    ]:
        response = client.request(method, url, headers=auth("default"))
        assert_problem(response, 405)
        assert response.headers["allow"] == allow, (method, url)


def test_big_body_by_content_length_is_413(client: TestClient, auth: Auth, fact_count) -> None:
    before = fact_count()
    body = json.dumps({"path": "/a", "content": "x" * LIMIT}).encode()
    response = client.post(
        "/v1/facts", content=body, headers={**auth("default"), "Content-Type": "application/json"}
    )
    assert_problem(response, 413)
    assert fact_count() == before


def test_big_streamed_body_is_413(client: TestClient, auth: Auth, fact_count) -> None:
    """No Content-Length (chunked): the limit counts the bytes as they arrive."""
    before = fact_count()

    def chunks():
        yield b'{"path": "/a", "content": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    response = client.post(
        "/v1/facts",
        content=chunks(),
        headers={**auth("default"), "Content-Type": "application/json"},
    )
    assert "content-length" not in response.request.headers
    assert_problem(response, 413)
    assert fact_count() == before


def test_body_just_under_the_limit_is_read(client: TestClient, auth: Auth) -> None:
    body = json.dumps({"path": "/a", "content": "x" * (LIMIT - 100)}).encode()
    assert len(body) <= LIMIT
    response = client.post(
        "/v1/facts", content=body, headers={**auth("default"), "Content-Type": "application/json"}
    )
    assert_problem(response, 422)  # read whole, then refused for its content length


def _tokens(settings: Settings) -> dict[str, str | None]:
    now = dt.datetime.now(dt.UTC)
    later = now + dt.timedelta(hours=1)
    secret = settings.secret_path.read_bytes().strip()
    good = issue_token(settings, "alice", dt.timedelta(hours=1))
    yesterday = now - dt.timedelta(days=1)
    return {
        "missing": None,
        "garbage": "not-a-jwt",
        "expired": issue_token(settings, "alice", dt.timedelta(hours=1), now=yesterday),
        "wrong key": jwt.encode({"sub": "alice", "exp": later}, "k" * 64, "HS256"),
        "alg none": jwt.encode({"sub": "alice", "exp": later}, None, "none"),
        "other alg": jwt.encode({"sub": "alice", "exp": later}, secret, "HS512"),
        "no exp": jwt.encode({"sub": "alice"}, secret, "HS256"),
        "bad subject": jwt.encode({"sub": "a b", "exp": later}, secret, "HS256"),
        "tampered": good[:-3] + ("AAA" if not good.endswith("AAA") else "BBB"),
        # Expired and forged: it must not hear that it is only expired.
        "expired with a wrong key": jwt.encode(
            {"sub": "alice", "exp": now - dt.timedelta(hours=1)}, "k" * 64, "HS256"
        ),
    }


BAD_TOKENS = [
    "missing", "garbage", "wrong key", "alg none", "other alg", "no exp",
    "bad subject", "tampered", "expired with a wrong key",
]  # fmt: skip


@pytest.mark.parametrize("kind", BAD_TOKENS)
def test_every_bad_token_is_the_same_401(client: TestClient, settings: Settings, kind: str) -> None:
    token = _tokens(settings)[kind]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.get("/v1/whoami", headers=headers)
    problem = assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert problem["detail"] == "invalid or missing bearer token"


def test_an_expired_token_hears_that_it_expired(client: TestClient, settings: Settings) -> None:
    """The one refusal that says why (RFC 6750 error_description): a genuine token whose
    time is up, whose holder needs a new one."""
    response = client.get(
        "/v1/whoami", headers={"Authorization": f"Bearer {_tokens(settings)['expired']}"}
    )
    problem = assert_problem(response, 401)
    assert problem["detail"] == "the bearer token has expired"
    assert response.headers["www-authenticate"] == (
        'Bearer error="invalid_token", error_description="the bearer token has expired"'
    )


def test_401_comes_before_validation(client: TestClient, fact_count) -> None:
    before = fact_count()
    response = client.post("/v1/facts", json={"nonsense": True})
    assert_problem(response, 401)
    assert_problem(client.get("/v1/facts", params={"limit": 1000}), 401)
    assert fact_count() == before


def test_other_schemes_are_401(client: TestClient) -> None:
    response = client.get("/v1/whoami", headers={"Authorization": "Basic YWxpY2U6eA=="})
    assert_problem(response, 401)


def test_unexpected_error_is_a_bare_500(
    client: TestClient, auth: Auth, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_args, **_kwargs):
        raise RuntimeError("SELECT secret FROM /home/someone/memory.db")

    monkeypatch.setattr(fact_service, "list_facts", explode)
    response = client.get("/v1/facts", headers=auth("default"))
    problem = assert_problem(response, 500)
    assert "SELECT" not in response.text and "/home" not in response.text
    assert "Traceback" not in response.text
    assert problem["type"] == "/problems/internal"


def test_problem_types_are_stable(client: TestClient, auth: Auth) -> None:
    assert client.get("/nothing").json()["type"] == "/problems/not-found"
    assert client.get("/v1/facts/424242", headers=auth("default")).json()["type"] == (
        "/problems/not-found"
    )
    assert client.get("/v1/whoami").json()["type"] == "/problems/unauthorized"
