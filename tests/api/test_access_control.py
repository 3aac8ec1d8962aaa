"""Issue 8, sections 1 and 3, over HTTP: role names as subjects, self-granted
stores, and path-tag declassification."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert

from app.db.engine import write_transaction
from app.db.tables import casbin_rule
from app.runtime import Runtime
from tests.api.conftest import Auth, assert_problem


def assert_refused_token(response) -> None:
    problem = assert_problem(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"
    # The same words as a missing token: nothing tells which names are roles.
    assert problem["detail"] == "invalid or missing bearer token"


@pytest.mark.parametrize("name", ["admin", "everyone"])
def test_a_token_for_a_built_in_role_is_refused(
    client: TestClient, auth: Auth, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert_refused_token(client.get("/v1/whoami", headers=auth(name)))
        assert_refused_token(
            client.post("/v1/policies", json={"line": "g, x, admin"}, headers=auth(name))
        )
    assert f"{name!r} is a role name" in caplog.text


def test_a_token_for_a_custom_role_is_refused_once_a_g_line_names_it(
    client: TestClient, auth: Auth, add_policy: Callable[..., None]
) -> None:
    assert client.get("/v1/whoami", headers=auth("reader")).status_code == 200
    add_policy("g, cli, reader")
    assert_refused_token(client.get("/v1/whoami", headers=auth("reader")))
    me = client.get("/v1/whoami", headers=auth("cli")).json()
    assert me["subject"] == "cli" and me["roles"] == ["everyone", "reader"]


def test_policy_add_refuses_a_g_line_that_makes_a_subject_a_role(
    client: TestClient, auth: Auth
) -> None:
    response = client.post(
        "/v1/policies", json={"line": "g, bob, default"}, headers=auth("default")
    )
    problem = assert_problem(response, 422)
    assert "'default' is a subject" in problem["detail"]
    assert problem["errors"][0]["loc"] == ["body", "line"]
    # The admin token still works: nothing was written.
    assert client.get("/v1/whoami", headers=auth("default")).json()["roles"] == [
        "admin",
        "everyone",
    ]


def test_a_tag_rule_cannot_grant_a_store_into_another_subject_s_subtree(
    client: TestClient, auth: Auth, add_policy: Callable[..., None], rt: Runtime, fact_count
) -> None:
    add_policy("p, alice, path:/alice/*, write, allow", "p, alice, path:/alice/*, read, allow")
    private = client.post(
        "/v1/facts", json={"path": "/alice/diary", "content": "mine"}, headers=auth("alice")
    )
    assert private.status_code == 201
    refused = client.post(
        "/v1/policies",
        json={"line": "p, dave, tag:team=green, write, allow"},
        headers=auth("default"),
    )
    assert "a tag rule cannot allow 'write'" in assert_problem(refused, 422)["detail"]
    with write_transaction(rt.engine) as conn:  # as an older memory may still hold it
        conn.execute(
            insert(casbin_rule).values(
                ptype="p", v0="dave", v1="tag:team=green", v2="write", v3="allow"
            )
        )
    before = fact_count()
    body = {"path": "/alice/diary", "content": "planted", "tags": {"team": "green"}}
    assert_problem(client.post("/v1/facts", json=body, headers=auth("dave")), 403)
    batch = {"facts": [{**body, "path": "/dave/own"}]}
    assert_problem(client.post("/v1/facts/batch", json=batch, headers=auth("dave")), 403)
    assert fact_count() == before


def test_a_writer_cannot_publish_its_subtree_without_tag(
    client: TestClient, auth: Auth, add_policy: Callable[..., None]
) -> None:
    hidden = client.post(
        "/v1/facts", json={"path": "/x/other", "content": "not public"}, headers=auth("default")
    ).json()
    add_policy("p, w, path:/x/*, write, allow")
    refused = client.put("/v1/paths/x/tags", json={"visibility": "public"}, headers=auth("w"))
    assert "may not change tags" in assert_problem(refused, 403)["detail"]
    assert_problem(client.get(f"/v1/facts/{hidden['id']}", headers=auth("stranger")), 404)
    client.put("/v1/paths/x/tags", json={"team": "blue"}, headers=auth("default"))
    assert_problem(client.delete("/v1/paths/x/tags/team", headers=auth("w")), 403)
    # Someone who cannot see the node learns nothing about it.
    unseen = client.put("/v1/paths/x/tags", json={"visibility": "public"}, headers=auth("s"))
    assert_problem(unseen, 404)

    # A holder of `tag` changes only facts it can read (issue 18): w reads /x.
    add_policy("p, w, path:/x/*, tag, allow", "p, w, path:/x/*, read, allow")
    done = client.put("/v1/paths/x/tags", json={"visibility": "public"}, headers=auth("w"))
    assert done.status_code == 200 and done.json()["tags"]["visibility"] == "public"
    assert client.delete("/v1/paths/x/tags/team", headers=auth("w")).status_code == 204


def test_whoami_and_policies_show_the_tag_action(client: TestClient, auth: Auth) -> None:
    me = client.get("/v1/whoami", headers=auth("default")).json()
    assert {"subject": "default", "object": "path:/*", "action": "tag", "effect": "allow"} in (
        me["permissions"]
    )
    added = client.post(
        "/v1/policies", json={"line": "p, w, path:/w/*, tag, allow"}, headers=auth("default")
    )
    assert added.status_code == 201 and added.json()["values"][2] == "tag"
