"""Broken object-level authorization, route by route: a fact another subject may not read
does not exist for it (404, never 403), in every route, count and listing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from tests.api.conftest import Auth, assert_problem

SECRET = "alice keeps the launch codes in the blue folder"


def _policies(subject: str) -> list[str]:
    return [f"p, {subject}, path:/{subject}/*, {act}, allow" for act in ("read", "write", "delete")]


class World:
    def __init__(self, client: TestClient, auth: Auth) -> None:
        self.client, self.auth = client, auth

    def call(self, subject: str, method: str, url: str, **kwargs) -> Response:
        return self.client.request(method, url, headers=self.auth(subject), **kwargs)

    def store(self, subject: str, path: str, content: str, **extra) -> dict:
        response = self.call(
            subject, "POST", "/v1/facts", json={"path": path, "content": content, **extra}
        )
        assert response.status_code == 201, response.text
        return response.json()


@pytest.fixture
def world(client: TestClient, auth: Auth, add_policy: Callable[..., None]) -> World:
    add_policy(*_policies("alice"), *_policies("bob"))
    return World(client, auth)


def _never_leaks(response: Response, fact_id: int) -> None:
    assert SECRET not in response.text
    assert "blue folder" not in response.text
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        facts = body.get("facts") or [r["fact"] for r in body.get("results", [])]
        assert fact_id not in [f["id"] for f in facts]
        assert fact_id not in [f.get("supersedes_id") for f in facts]
        assert fact_id not in [f.get("superseded_by_id") for f in facts]


def test_bob_never_sees_alice(world: World) -> None:
    bob_fact = world.store("bob", "/bob/notes", "bob likes tea")
    secret = world.store(
        "alice", "/alice/plans", f"{SECRET} see [[/bob/notes]] and [[/alice/plans]]"
    )
    sid = secret["id"]

    # Her link to a place she cannot see shows as not existing; her own does.
    assert secret["links"] == [
        {"path": "/bob/notes", "exists": False},
        {"path": "/alice/plans", "exists": True},
    ]

    not_found = [
        ("GET", f"/v1/facts/{sid}", {}),
        ("GET", f"/v1/facts/{sid}", {"params": {"peek": True}}),
        ("GET", f"/v1/facts/{sid}", {"params": {"include_deleted": True}}),
        ("POST", f"/v1/facts/{sid}/recall", {}),
        ("GET", f"/v1/facts/{sid}/history", {}),
        ("DELETE", f"/v1/facts/{sid}", {}),
        (
            "POST",
            "/v1/facts",
            {"json": {"path": "/bob/x", "content": "mine now", "supersedes_id": sid}},
        ),
        ("GET", "/v1/paths/alice", {}),
        ("GET", "/v1/paths/alice/plans", {}),
        ("PUT", "/v1/paths/alice/plans/tags", {"json": {"k": "v"}}),
        ("DELETE", "/v1/paths/alice/plans/tags/k", {}),
    ]
    for method, url, kwargs in not_found:
        response = world.call("bob", method, url, **kwargs)
        assert_problem(response, 404)
        _never_leaks(response, sid)

    visible = [
        ("GET", "/v1/facts", {}),
        ("GET", "/v1/facts", {"params": {"under": "/alice"}}),
        ("GET", "/v1/facts", {"params": {"sort": "strength"}}),
        ("GET", "/v1/facts", {"params": {"tag": "owner=alice"}}),
        ("GET", "/v1/search", {"params": {"q": "launch codes folder"}}),
        ("GET", "/v1/search", {"params": {"q": "launch codes", "mode": "keyword", "peek": True}}),
        ("POST", "/v1/search", {"json": {"q": "blue folder", "under": "/alice"}}),
        ("GET", f"/v1/facts/{bob_fact['id']}", {}),
        ("GET", f"/v1/facts/{bob_fact['id']}/history", {}),
    ]
    for method, url, kwargs in visible:
        response = world.call("bob", method, url, **kwargs)
        assert response.status_code == 200, (url, response.text)
        _never_leaks(response, sid)

    root = world.call("bob", "GET", "/v1/paths/").json()
    assert "/alice" not in [c["path"] for c in root["children"]]
    assert root["subtree_fact_count"] == 1 + 7  # his fact and the public /memory ones

    # The same requests find her fact for alice: bob's misses are the ACL, not the query.
    found = world.call("alice", "GET", "/v1/search", params={"q": "launch codes folder"}).json()
    assert sid in [r["fact"]["id"] for r in found["results"]]
    assert world.call("alice", "GET", "/v1/paths/alice/plans").status_code == 200


def test_counts_exclude_what_bob_cannot_read(world: World) -> None:
    world.store("alice", "/alice/a", "one")
    world.store("alice", "/alice/a", "two")
    world.store("bob", "/bob/a", "three")
    # A place both may not write to but where both have a fact: shared by default.
    world.store("default", "/shared/x", "default's own")
    bob_root = world.call("bob", "GET", "/v1/paths/").json()
    alice_root = world.call("alice", "GET", "/v1/paths/").json()
    default_root = world.call("default", "GET", "/v1/paths/").json()
    children = {c["path"]: c["fact_count"] for c in bob_root["children"]}
    assert children == {"/bob": 1, "/memory": 7}
    assert bob_root["subtree_fact_count"] == 1 + 7
    assert {c["path"]: c["fact_count"] for c in alice_root["children"]} == {
        "/alice": 2,
        "/memory": 7,
    }
    assert default_root["subtree_fact_count"] == 2 + 1 + 1 + 7


def test_alice_deleted_and_superseded_facts_stay_hidden(world: World) -> None:
    first = world.store("alice", "/alice/plans", SECRET)
    second = world.store("alice", "/alice/plans", "new plan", supersedes_id=first["id"])
    world.call("alice", "DELETE", f"/v1/facts/{second['id']}")
    for fid in (first["id"], second["id"]):
        for params in ({}, {"include_deleted": True}, {"peek": True}):
            assert_problem(world.call("bob", "GET", f"/v1/facts/{fid}", params=params), 404)
        assert_problem(world.call("bob", "GET", f"/v1/facts/{fid}/history"), 404)
    # Alice herself still has the whole chain.
    chain = world.call("alice", "GET", f"/v1/facts/{second['id']}/history").json()["facts"]
    assert [f["id"] for f in chain] == [first["id"], second["id"]]


def test_bob_cannot_write_into_alice_tree(world: World, fact_count) -> None:
    before = fact_count()
    response = world.call("bob", "POST", "/v1/facts", json={"path": "/alice/plans", "content": "x"})
    assert_problem(response, 403)  # a store names a place, not a fact: nothing to hide
    assert fact_count() == before


def test_a_successor_bob_cannot_read_does_not_show(world: World) -> None:
    """Default corrects a public /memory fact with a private one: bob sees the old one only."""
    new = world.store("default", "/memory", "a private correction", supersedes_id=1)
    old = world.call("bob", "GET", "/v1/facts/1", params={"peek": True}).json()
    assert old["superseded_by_id"] is None
    chain = world.call("bob", "GET", "/v1/facts/1/history").json()["facts"]
    assert [f["id"] for f in chain] == [1]
    assert_problem(world.call("bob", "GET", f"/v1/facts/{new['id']}"), 404)


def test_read_only_facts_are_403_on_change(world: World, add_policy) -> None:
    add_policy("p, bob, path:/alice/shared/*, read, allow")
    shared = world.store("alice", "/alice/shared", "for bob to read")
    assert world.call("bob", "GET", f"/v1/facts/{shared['id']}").status_code == 200
    assert_problem(world.call("bob", "DELETE", f"/v1/facts/{shared['id']}"), 403)
    superseding = {"path": "/bob/x", "content": "corrected", "supersedes_id": shared["id"]}
    assert_problem(world.call("bob", "POST", "/v1/facts", json=superseding), 403)
    assert_problem(world.call("bob", "PUT", "/v1/paths/alice/shared/tags", json={"k": "v"}), 403)


def test_owner_rule_of_the_seed(client: TestClient, auth: Auth, add_policy) -> None:
    """`p, alice, tag:owner=alice, read, allow` gives alice her own facts and nothing more."""
    add_policy("p, alice, tag:owner=alice, read, allow", "p, alice, path:/alice/*, write, allow")
    world = World(client, auth)
    own = world.store("alice", "/alice/diary", "my own")
    theirs = world.store("default", "/alice/diary", "written by default")
    elsewhere = world.store("default", "/elsewhere", "not hers")
    assert world.call("alice", "GET", f"/v1/facts/{own['id']}").status_code == 200
    for fid in (theirs["id"], elsewhere["id"]):
        assert_problem(world.call("alice", "GET", f"/v1/facts/{fid}"), 404)
    listing = world.call("alice", "GET", "/v1/facts", params={"limit": 100}).json()["facts"]
    mine = [f["id"] for f in listing if f["path"] != "/memory"]
    assert mine == [own["id"]]
    assert {f["owner"] for f in listing} == {"alice", "default"}
    assert all(
        f["effective_tags"].get("visibility") == "public" for f in listing if f["owner"] != "alice"
    )


def test_memory_is_public_but_defaults_private_facts_are_not(
    client: TestClient, auth: Auth
) -> None:
    world = World(client, auth)
    listing = world.call("carol", "GET", "/v1/facts", params={"under": "/memory"}).json()
    assert len(listing["facts"]) == 7
    assert world.call("carol", "GET", "/v1/facts/1").status_code == 200
    private = world.store("default", "/memory/extra", "owned by default, not public")
    assert_problem(world.call("carol", "GET", f"/v1/facts/{private['id']}"), 404)
    public = world.store("default", "/memory/extra", "public too", tags={"visibility": "public"})
    assert world.call("carol", "GET", f"/v1/facts/{public['id']}").status_code == 200
