"""The tree over HTTP: a node, its tags, children and counts."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import Auth, assert_problem


def _store(client: TestClient, auth: Auth, path: str, content: str = "a fact") -> dict:
    response = client.post(
        "/v1/facts", json={"path": path, "content": content}, headers=auth("default")
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_root_and_nodes(client: TestClient, auth: Auth) -> None:
    _store(client, auth, "/work/acme")
    _store(client, auth, "/work/acme/db")
    _store(client, auth, "/work")
    root = client.get("/v1/paths/", headers=auth("default")).json()
    assert root["path"] == "/"
    assert {"path": "/work", "fact_count": 3} in root["children"]
    work = client.get("/v1/paths/Work", headers=auth("default")).json()
    assert work == {
        "path": "/work",
        "tags": {},
        "effective_tags": {},
        "children": [{"path": "/work/acme", "fact_count": 2}],
        "fact_count": 1,
        "subtree_fact_count": 3,
    }
    assert (
        client.get("/v1/paths/work/acme/", headers=auth("default")).json()["path"] == "/work/acme"
    )
    assert_problem(client.get("/v1/paths/nowhere", headers=auth("default")), 404)
    problem = assert_problem(client.get("/v1/paths/Bad%20Segment", headers=auth("default")), 422)
    assert problem["errors"][0]["loc"] == ["path", "path"]


def test_set_and_remove_tags(client: TestClient, auth: Auth) -> None:
    fact = _store(client, auth, "/work/acme/db")
    response = client.put(
        "/v1/paths/work/tags",
        json={"client": "acme", "visibility": "team"},
        headers=auth("default"),
    )
    assert response.status_code == 200, response.text
    assert response.json()["tags"] == {"client": "acme", "visibility": "team"}
    inner = client.put(
        "/v1/paths/work/acme/tags", json={"client": "acme2"}, headers=auth("default")
    )
    assert inner.json()["effective_tags"] == {"client": "acme2", "visibility": "team"}
    read = client.get(f"/v1/facts/{fact['id']}", params={"peek": True}, headers=auth("default"))
    assert read.json()["effective_tags"]["client"] == "acme2"  # nearest wins

    gone = client.delete("/v1/paths/work/acme/tags/client", headers=auth("default"))
    assert gone.status_code == 204
    read = client.get(f"/v1/facts/{fact['id']}", params={"peek": True}, headers=auth("default"))
    assert read.json()["effective_tags"]["client"] == "acme"
    assert_problem(client.delete("/v1/paths/work/acme/tags/client", headers=auth("default")), 404)


def test_bad_tags_are_422(client: TestClient, auth: Auth) -> None:
    _store(client, auth, "/work")
    for body in ({"k": "two words"}, {"Bad Key": "v"}, {"k": 3}, ["k", "v"]):
        assert_problem(client.put("/v1/paths/work/tags", json=body, headers=auth("default")), 422)
    node = client.get("/v1/paths/work", headers=auth("default")).json()
    assert node["tags"] == {}


def test_too_many_tags_in_one_request_is_422(client: TestClient, auth: Auth) -> None:
    _store(client, auth, "/work")
    tags = {f"k{i}": "v" for i in range(33)}
    assert_problem(client.put("/v1/paths/work/tags", json=tags, headers=auth("default")), 422)


def test_a_node_keeps_at_most_32_tags_across_requests(client: TestClient, auth: Auth) -> None:
    _store(client, auth, "/work")
    url = "/v1/paths/work/tags"
    full = {f"k{i}": "v" for i in range(32)}
    assert client.put(url, json=full, headers=auth("default")).status_code == 200
    more = assert_problem(client.put(url, json={"extra": "v"}, headers=auth("default")), 422)
    assert "/work would carry 33 tags" in more["detail"]
    assert more["errors"][0]["loc"] == ["body", "tags"]
    twice = client.put(url, json={"Team": "a", "team": "b"}, headers=auth("default"))
    assert "tag 'team' is given twice" in assert_problem(twice, 422)["detail"]
    node = client.get("/v1/paths/work", headers=auth("default")).json()
    assert node["tags"] == full
