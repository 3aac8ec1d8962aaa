"""Policies over HTTP (role admin), whoami, and changes taking effect on the next request."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import Auth, assert_problem

LINE = "p, carol, path:/team/*, read, allow"


def test_admin_lists_adds_and_removes(client: TestClient, auth: Auth) -> None:
    listing = client.get("/v1/policies", headers=auth("default"))
    assert listing.status_code == 200
    assert {"line": "g, default, admin", "ptype": "g", "values": ["default", "admin"]} in (
        listing.json()["policies"]
    )
    added = client.post("/v1/policies", json={"line": LINE}, headers=auth("default"))
    assert added.status_code == 201
    assert added.json() == {
        "line": LINE,
        "ptype": "p",
        "values": ["carol", "path:/team/*", "read", "allow"],
    }
    assert_problem(client.post("/v1/policies", json={"line": LINE}, headers=auth("default")), 409)
    removed = client.request("DELETE", "/v1/policies", json={"line": LINE}, headers=auth("default"))
    assert removed.status_code == 204
    again = client.request("DELETE", "/v1/policies", json={"line": LINE}, headers=auth("default"))
    assert_problem(again, 404)


def test_bad_policy_lines_are_422_with_a_clear_message(client: TestClient, auth: Auth) -> None:
    for line in ("p, carol, /team/*, read, allow", "x, y", "p, carol, path:/a, fly, allow"):
        response = client.post("/v1/policies", json={"line": line}, headers=auth("default"))
        problem = assert_problem(response, 422)
        assert problem["errors"][0]["loc"] == ["body", "line"]
    response = client.post(
        "/v1/policies", json={"line": "p, carol, /team/*, read, allow"}, headers=auth("default")
    )
    assert "path:/a/b" in response.json()["detail"]


def test_non_admin_gets_403(client: TestClient, auth: Auth) -> None:
    assert_problem(client.get("/v1/policies", headers=auth("carol")), 403)
    grab = client.post("/v1/policies", json={"line": "g, carol, admin"}, headers=auth("carol"))
    assert_problem(grab, 403)
    drop = client.request(
        "DELETE", "/v1/policies", json={"line": "g, default, admin"}, headers=auth("carol")
    )
    assert_problem(drop, 403)
    assert "admin" not in client.get("/v1/whoami", headers=auth("carol")).json()["roles"]


def test_a_role_given_over_http_makes_an_admin_at_once(client: TestClient, auth: Auth) -> None:
    client.post("/v1/policies", json={"line": "g, carol, admin"}, headers=auth("default"))
    assert client.get("/v1/policies", headers=auth("carol")).status_code == 200


def test_whoami(client: TestClient, auth: Auth) -> None:
    me = client.get("/v1/whoami", headers=auth("default")).json()
    assert me["subject"] == "default"
    assert me["roles"] == ["admin", "everyone"]
    assert {"subject": "default", "object": "path:/*", "action": "write", "effect": "allow"} in (
        me["permissions"]
    )
    stranger = client.get("/v1/whoami", headers=auth("carol")).json()
    public = {"object": "tag:visibility=public", "action": "read", "effect": "allow"}
    assert stranger == {
        "subject": "carol",
        "roles": ["everyone"],
        "permissions": [{"subject": "everyone", **public}],
    }


def _team_fact(client: TestClient, auth: Auth) -> int:
    response = client.post(
        "/v1/facts", json={"path": "/team/plan", "content": "ship friday"}, headers=auth("default")
    )
    return int(response.json()["id"])


def test_policy_added_over_http_applies_to_the_next_request(client: TestClient, auth: Auth) -> None:
    fid = _team_fact(client, auth)
    assert_problem(client.get(f"/v1/facts/{fid}", headers=auth("carol")), 404)
    client.post("/v1/policies", json={"line": LINE}, headers=auth("default"))
    assert client.get(f"/v1/facts/{fid}", headers=auth("carol")).status_code == 200
    client.request("DELETE", "/v1/policies", json={"line": LINE}, headers=auth("default"))
    assert_problem(client.get(f"/v1/facts/{fid}", headers=auth("carol")), 404)


def test_policy_added_by_the_cli_applies_to_the_next_request(
    client: TestClient, auth: Auth, add_policy
) -> None:
    fid = _team_fact(client, auth)
    assert_problem(client.get(f"/v1/facts/{fid}", headers=auth("carol")), 404)
    add_policy(LINE)  # the policy service on the same database, as `embornal policy add` does
    assert client.get(f"/v1/facts/{fid}", headers=auth("carol")).status_code == 200
    add_policy("p, carol, path:/team/*, read, deny")
    assert_problem(client.get(f"/v1/facts/{fid}", headers=auth("carol")), 404)


def remove(client: TestClient, auth: Auth, line: str, subject: str = "default"):
    return client.request("DELETE", "/v1/policies", json={"line": line}, headers=auth(subject))


def test_the_last_line_giving_anyone_admin_cannot_be_removed(
    client: TestClient, auth: Auth
) -> None:
    """The owner would lock themself out: the Access page, policies, tokens, export and
    backup all need the role. Only the local command line on the file gets it back."""
    refused = assert_problem(remove(client, auth, "g, default, admin"), 409)
    assert "add another admin first" in refused["detail"]
    assert client.get("/v1/policies", headers=auth("default")).status_code == 200
    # With a second admin (here through a role), the first may go...
    for line in ("g, carol, ops", "g, ops, admin"):
        assert client.post("/v1/policies", json={"line": line}, headers=auth("default")).is_success
    assert remove(client, auth, "g, default, admin").status_code == 204
    # ...and then carol's membership and her role's line are the last ones.
    assert_problem(remove(client, auth, "g, default, admin"), 403)  # no admin any more
    assert_problem(remove(client, auth, "g, carol, ops", "carol"), 409)
    assert_problem(remove(client, auth, "g, ops, admin", "carol"), 409)
    assert client.get("/v1/policies", headers=auth("carol")).status_code == 200


def test_everyone_holding_admin_counts_for_every_subject(client: TestClient, auth: Auth) -> None:
    me = auth("default")
    assert client.post("/v1/policies", json={"line": "g, everyone, admin"}, headers=me).is_success
    assert remove(client, auth, "g, default, admin").status_code == 204
    assert client.get("/v1/policies", headers=auth("dave")).status_code == 200
    assert_problem(remove(client, auth, "g, everyone, admin"), 409)
