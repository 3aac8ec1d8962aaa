"""A supersede keeps the old fact's own tags unless the request gives tags (SPEC
"Memory over time"): decided once, in the use case, for every front end."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from app.runtime import Runtime
from app.usecases.memory import Memory, NewFact
from tests.api.conftest import Auth, assert_problem


def store(client: TestClient, auth: Auth, **body) -> dict:
    response = client.post("/v1/facts", json=body, headers=auth("default"))
    assert response.status_code == 201, response.text
    return response.json()


def test_a_supersede_without_tags_keeps_the_old_facts(client: TestClient, auth: Auth) -> None:
    old = store(client, auth, path="/cards", content="fireball", tags={"kind": "power", "x": "1"})
    kept = store(client, auth, path="/cards", content="fireball, revised", supersedes_id=old["id"])
    assert kept["tags"] == {"kind": "power", "owner": "default", "x": "1"}
    replaced = store(
        client, auth, path="/cards", content="again", supersedes_id=kept["id"], tags={"kind": "x"}
    )
    assert replaced["tags"] == {"kind": "x", "owner": "default"}
    dropped = store(
        client, auth, path="/cards", content="bare", supersedes_id=replaced["id"], tags={}
    )
    assert dropped["tags"] == {"owner": "default"}
    # A new fact without tags has none of its own but its owner.
    assert store(client, auth, path="/cards", content="new")["tags"] == {"owner": "default"}
    null = client.post(
        "/v1/facts", json={"path": "/cards", "content": "n", "tags": None}, headers=auth("default")
    )
    assert "not null" in assert_problem(null, 422)["detail"]
    batch = client.post(
        "/v1/facts/batch",
        json={"facts": [{"path": "/cards", "content": "b", "supersedes_id": old["id"]}]},
        headers=auth("default"),
    )
    # The old fact is superseded already: a batch meets the same rule and the same 409.
    assert_problem(batch, 409)


def test_kept_tags_are_the_writers_not_the_old_owners(
    client: TestClient, auth: Auth, add_policy: Callable[..., None]
) -> None:
    """The owner tag is never kept: the memory writes the new writer's."""
    add_policy("p, alice, path:/shared/*, write, allow", "p, alice, path:/shared/*, read, allow")
    old = store(client, auth, path="/shared", content="v1", tags={"kind": "power"})
    new = client.post(
        "/v1/facts",
        json={"path": "/shared", "content": "v2", "supersedes_id": old["id"]},
        headers=auth("alice"),
    ).json()
    assert new["tags"] == {"kind": "power", "owner": "alice"} and new["owner"] == "alice"


def test_the_command_line_keeps_them_too(rt: Runtime) -> None:
    memory = Memory(rt)
    old = memory.store("default", NewFact("/cards", "frost", {"kind": "power"}))
    new = memory.store("default", NewFact("/cards", "frost, revised", supersedes_id=old.id))
    assert new.tags == {"kind": "power", "owner": "default"}
    retagged = memory.retag("default", new.id, {"kind": "spell"})
    assert retagged.tags == {"kind": "spell", "owner": "default"}
    assert retagged.content == new.content and retagged.supersedes_id == new.id
    assert memory.get("default", new.id, peek=True).superseded is True
