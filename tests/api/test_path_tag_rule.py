"""Issue 18, item 1: `tag` on a subtree cannot change who may read, write or delete
facts beneath that the tagger cannot read itself."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from tests.api.conftest import Auth, assert_problem

SECRET = {"path": "/shared/bob", "content": "bob's secret plan"}


def _world(client: TestClient, auth: Auth, add_policy: Callable[..., None]) -> int:
    add_policy(
        "p, alice, path:/shared/*, tag, allow",
        "p, alice, path:/shared/alice/*, read, allow",
        "p, alice, path:/shared/alice/*, write, allow",
        "p, bob, path:/shared/*, read, allow",
        "p, bob, path:/shared/*, write, allow",
        "p, bob, path:/shared/*, delete, allow",
    )
    stored = client.post("/v1/facts", json=SECRET, headers=auth("bob"))
    assert stored.status_code == 201, stored.text
    return int(stored.json()["id"])


def _found_by(client: TestClient, auth: Auth, subject: str) -> list[int]:
    page = client.get("/v1/search", params={"q": "secret plan"}, headers=auth(subject)).json()
    return [r["fact"]["id"] for r in page["results"]]


def test_tagging_a_subtree_cannot_publish_a_fact_the_tagger_cannot_read(
    client: TestClient, auth: Auth, add_policy: Callable[..., None]
) -> None:
    secret = _world(client, auth, add_policy)
    for tags in ({"visibility": "public"}, {"team": "green"}):
        refused = client.put("/v1/paths/shared/tags", json=tags, headers=auth("alice"))
        problem = assert_problem(refused, 403)
        assert "may not read" in problem["detail"]
    # Nothing was written: the node has no tags, and the secret stays with bob.
    node = client.get("/v1/paths/shared", headers=auth("bob")).json()
    assert node["tags"] == {}
    assert _found_by(client, auth, "alice") == []
    assert _found_by(client, auth, "nobody") == []
    assert _found_by(client, auth, "bob") == [secret]


def test_removing_a_path_tag_is_refused_when_it_changes_an_unreadable_fact(
    client: TestClient, auth: Auth, add_policy: Callable[..., None]
) -> None:
    # default (admin) sets team=red on /shared/bob; alice may tag /shared but not read bob's fact.
    _world(client, auth, add_policy)
    set_by_admin = client.put(
        "/v1/paths/shared/bob/tags", json={"team": "red"}, headers=auth("default")
    )
    assert set_by_admin.status_code == 200, set_by_admin.text
    refused = client.delete("/v1/paths/shared/bob/tags/team", headers=auth("alice"))
    assert_problem(refused, 403)
    tags = client.get("/v1/paths/shared/bob", headers=auth("default")).json()["tags"]
    assert tags == {"team": "red"}


def test_tagging_still_works_over_facts_the_tagger_may_read(
    client: TestClient, auth: Auth, add_policy: Callable[..., None]
) -> None:
    secret = _world(client, auth, add_policy)
    mine = client.post(
        "/v1/facts",
        json={"path": "/shared/alice", "content": "alice's note"},
        headers=auth("alice"),
    )
    assert mine.status_code == 201
    done = client.put("/v1/paths/shared/alice/tags", json={"team": "green"}, headers=auth("alice"))
    assert done.status_code == 200, done.text
    assert done.json()["tags"] == {"team": "green"}
    # A tag no hidden fact would take is fine too: bob's fact holds its own.
    own = client.post(
        "/v1/facts",
        json={"path": "/shared/bob", "content": "bob's plan", "tags": {"visibility": "private"}},
        headers=auth("bob"),
    )
    assert own.status_code == 201
    # The plain secret would take it, deleted or not: a deleted fact stays readable by
    # id (include_deleted) and in its history, so its tags still decide who reads it.
    hidden_plain = client.delete(f"/v1/facts/{secret}", headers=auth("bob"))
    assert hidden_plain.status_code == 204
    refused = client.put(
        "/v1/paths/shared/tags", json={"visibility": "team"}, headers=auth("alice")
    )
    assert_problem(refused, 403)
    other = client.post(
        "/v1/facts",
        json={"path": "/shared/carol", "content": "carol's plan", "tags": {"visibility": "x"}},
        headers=auth("bob"),
    )
    assert other.status_code == 201
    done = client.put(
        "/v1/paths/shared/carol/tags", json={"visibility": "team"}, headers=auth("alice")
    )
    assert done.status_code == 200, done.text


def test_a_path_tag_named_owner_is_refused(client: TestClient, auth: Auth) -> None:
    refused = client.put("/v1/paths/notes/tags", json={"owner": "bob"}, headers=auth("default"))
    problem = assert_problem(refused, 422)
    assert "owner" in problem["detail"]
    assert client.get("/v1/paths/notes", headers=auth("default")).status_code == 404
