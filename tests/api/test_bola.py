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
    """Default corrects a public /memory fact with a private one (`tags: {}`, so not the
    old fact's visibility=public): bob sees the old one only."""
    new = world.store("default", "/memory", "a private correction", supersedes_id=1, tags={})
    old = world.call("bob", "GET", "/v1/facts/1", params={"peek": True}).json()
    assert old["superseded_by_id"] is None
    assert old["superseded"] is True
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


def _ids_in(body: object) -> set[int]:
    """Every fact id a JSON body names, wherever it sits (facts, results, pointers)."""
    found: set[int] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if key in ("id", "supersedes_id", "superseded_by_id") and isinstance(value, int):
                found.add(value)
            else:
                found |= _ids_in(value)
    elif isinstance(body, list):
        for item in body:
            found |= _ids_in(item)
    return found


def _reader_routes(fact_ids: list[int]) -> list[tuple[str, str, dict]]:
    routes: list[tuple[str, str, dict]] = [
        ("GET", "/v1/facts", {"params": {"limit": 100}}),
        ("GET", "/v1/facts", {"params": {"limit": 100, "sort": "strength"}}),
        ("GET", "/v1/facts", {"params": {"limit": 100, "under": "/alice"}}),
        ("GET", "/v1/facts", {"params": {"limit": 100, "under": "/bob"}}),
        ("GET", "/v1/search", {"params": {"q": "plan", "mode": "keyword", "peek": True}}),
        ("POST", "/v1/search", {"json": {"q": "plan", "peek": True}}),
        ("GET", "/v1/paths/", {}),
        ("GET", "/v1/paths/alice", {}),
        ("GET", "/v1/paths/bob", {}),
        ("GET", "/v1/whoami", {}),
    ]
    for fid in fact_ids:
        routes += [
            ("GET", f"/v1/facts/{fid}", {"params": {"peek": True}}),
            ("GET", f"/v1/facts/{fid}", {"params": {"include_deleted": True}}),
            ("POST", f"/v1/facts/{fid}/recall", {}),
            ("GET", f"/v1/facts/{fid}/history", {}),
        ]
    return routes


def _never_names(world: World, subject: str, hidden: list[dict], visible: list[int]) -> None:
    hidden_ids = {fact["id"] for fact in hidden}
    for method, url, kwargs in _reader_routes(visible + sorted(hidden_ids)):
        response = world.call(subject, method, url, **kwargs)
        if response.status_code == 404:
            continue  # the hidden facts' own routes: nothing to show, nothing shown
        assert response.status_code == 200, (method, url, response.text)
        leaked = _ids_in(response.json()) & hidden_ids
        assert not leaked, (subject, method, url, leaked)
        for fact in hidden:
            assert fact["content"] not in response.text, (subject, method, url)


def test_hidden_neighbours_leave_no_id_in_either_direction(
    world: World, add_policy: Callable[..., None]
) -> None:
    """Alice's fact superseded by bob's hidden one, bob's by alice's hidden one: each
    sees its old fact flagged `superseded`, with no pointer, in no route's JSON."""
    add_policy(
        *(f"p, bob, path:/alice/open/*, {act}, allow" for act in ("read", "write")),
        *(f"p, alice, path:/bob/open/*, {act}, allow" for act in ("read", "write")),
    )
    alice_old = world.store("alice", "/alice/open", "alice's plan, first draft")
    bob_new = world.store(
        "bob",
        "/bob/private",
        "bob's successor plan, kept from alice",
        supersedes_id=alice_old["id"],
    )
    bob_old = world.store("bob", "/bob/open", "bob's plan, first draft")
    alice_new = world.store(
        "alice",
        "/alice/private",
        "alice's successor plan, kept from bob",
        supersedes_id=bob_old["id"],
    )
    # The successor's writer reads both ends of its own link.
    assert bob_new["supersedes_id"] == alice_old["id"]
    assert alice_new["supersedes_id"] == bob_old["id"]

    for reader, old, hidden_new in (("alice", alice_old, bob_new), ("bob", bob_old, alice_new)):
        seen = world.call(reader, "GET", f"/v1/facts/{old['id']}", params={"peek": True}).json()
        assert seen["superseded"] is True
        assert seen["superseded_by_id"] is None
        history = world.call(reader, "GET", f"/v1/facts/{old['id']}/history").json()["facts"]
        assert [f["id"] for f in history] == [old["id"]]
        assert_problem(world.call(reader, "GET", f"/v1/facts/{hidden_new['id']}"), 404)
        listing = world.call(reader, "GET", "/v1/facts", params={"limit": 100}).json()["facts"]
        assert old["id"] not in [f["id"] for f in listing]  # superseded: out of listings
        # A second supersede is still a conflict: it tells nothing the flag did not.
        again = {"path": old["path"], "content": "another try", "supersedes_id": old["id"]}
        assert_problem(world.call(reader, "POST", "/v1/facts", json=again), 409)

    # The fact counts of the places each can see leave both old facts out.
    alice_open = world.call("alice", "GET", "/v1/paths/alice/open").json()
    assert alice_open["fact_count"] == 0
    _never_names(world, "alice", [bob_new], [alice_old["id"], bob_old["id"]])
    _never_names(world, "bob", [alice_new], [alice_old["id"], bob_old["id"]])


def test_history_does_not_walk_through_a_hidden_fact(world: World) -> None:
    """visible <- hidden <- visible: bob sees two one-fact chains, not their link."""
    first = world.store("default", "/bob/open", "first version of the plan")
    middle = world.store(
        "default", "/alice/secret", "hidden middle plan", supersedes_id=first["id"]
    )
    last = world.store(
        "default", "/bob/open", "last version of the plan", supersedes_id=middle["id"]
    )
    for fid in (first["id"], last["id"]):
        chain = world.call("bob", "GET", f"/v1/facts/{fid}/history").json()["facts"]
        assert [f["id"] for f in chain] == [fid]
    newest = world.call("bob", "GET", f"/v1/facts/{last['id']}", params={"peek": True}).json()
    assert newest["supersedes_id"] is None
    assert newest["superseded"] is False
    oldest = world.call("bob", "GET", f"/v1/facts/{first['id']}", params={"peek": True}).json()
    assert (oldest["superseded"], oldest["superseded_by_id"]) == (True, None)
    _never_names(world, "bob", [middle], [first["id"], last["id"]])
    # Default reads every link of the chain.
    full = world.call("default", "GET", f"/v1/facts/{first['id']}/history").json()["facts"]
    assert [f["id"] for f in full] == [first["id"], middle["id"], last["id"]]
