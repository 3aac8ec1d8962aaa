"""A body in any other type than JSON is a 415 problem that says so, and writes nothing."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.api.limits import is_json
from tests.api.conftest import Auth, assert_problem

FACT = {"path": "/notes", "content": "sent as something else"}


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/jsonx",
        "text/json",
        None,  # a body with no Content-Type at all
    ],
)
def test_a_body_that_is_not_json_is_415(
    client: TestClient, auth: Auth, fact_count, content_type: str | None
) -> None:
    headers = auth("default")
    if content_type:
        headers = {**headers, "Content-Type": content_type}
    before = fact_count()
    # JSON text under another type: the type is what is refused, not the bytes.
    response = client.post("/v1/facts", content=json.dumps(FACT).encode(), headers=headers)
    problem = assert_problem(response, 415)
    assert "application/json" in problem["detail"]
    assert "dictionar" not in response.text
    assert fact_count() == before


def test_form_data_on_every_body_route_is_415(client: TestClient, auth: Auth, fact_count) -> None:
    before = fact_count()
    for method, url in [
        ("POST", "/v1/facts"),
        ("POST", "/v1/facts/batch"),
        ("POST", "/v1/search"),
        ("PUT", "/v1/paths/notes/tags"),
        ("POST", "/v1/policies"),
        ("DELETE", "/v1/policies"),
    ]:
        response = client.request(method, url, data={"line": "x"}, headers=auth("default"))
        assert_problem(response, 415)
    assert fact_count() == before


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
def test_json_in_any_spelling_is_taken(client: TestClient, auth: Auth, content_type: str) -> None:
    headers = {**auth("default"), "Content-Type": content_type}
    response = client.post("/v1/facts", content=json.dumps(FACT).encode(), headers=headers)
    assert response.status_code == 201, response.text


def test_a_request_without_a_body_passes_whatever_its_type(client: TestClient, auth: Auth) -> None:
    headers = {**auth("default"), "Content-Type": "text/plain"}
    assert client.get("/v1/facts", headers=headers).status_code == 200
    fact = client.post("/v1/facts", json=FACT, headers=auth("default")).json()
    assert client.delete(f"/v1/facts/{fact['id']}", headers=headers).status_code == 204


def test_is_json_matches_what_fastapi_parses() -> None:
    assert is_json("application/merge-patch+json")
    assert not is_json("")
    assert not is_json("json")


def test_415_is_declared_on_routes_with_bodies(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            has_body = "requestBody" in operation
            assert ("415" in operation["responses"]) == has_body, (method, path)
