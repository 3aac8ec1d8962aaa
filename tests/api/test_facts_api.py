"""Facts over HTTP: store, read, recall, peek, delete, history, supersede, batch, list."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Auth, assert_problem
from tests.conftest import FakeClock

MEMORY_FACTS = 7  # written by the migration under /memory


def store(client: TestClient, auth: Auth, subject: str = "default", **body) -> dict:
    body.setdefault("path", "/projects/embornal")
    body.setdefault("content", "embornal stores small facts")
    response = client.post("/v1/facts", json=body, headers=auth(subject))
    assert response.status_code == 201, response.text
    return response.json()


def test_store_returns_every_field_of_a_fact(client: TestClient, auth: Auth) -> None:
    fact = store(client, auth, path="/Projects/Embornal/", tags={"lang": "py"})
    assert set(fact) >= {
        "id", "path", "content", "owner", "tags", "effective_tags", "links", "supersedes_id",
        "superseded_by_id", "superseded", "deleted_at", "created_at", "last_recall_at",
        "recall_count", "stability_days", "strength", "embedded",
    }  # fmt: skip
    assert fact["path"] == "/projects/embornal"
    assert fact["owner"] == "default"
    assert fact["tags"] == {"lang": "py", "owner": "default"}
    assert fact["created_at"].endswith("Z")
    assert fact["strength"] == 1.0
    assert fact["embedded"] is False  # the test settings load no model


def test_get_is_a_recall_and_peek_is_not(client: TestClient, auth: Auth, clock: FakeClock) -> None:
    fact = store(client, auth)
    clock.advance(days=3)
    peeked = client.get(f"/v1/facts/{fact['id']}", params={"peek": True}, headers=auth("default"))
    assert peeked.status_code == 200
    assert peeked.json()["recall_count"] == 0
    assert peeked.json()["strength"] < 0.1

    got = client.get(f"/v1/facts/{fact['id']}", headers=auth("default")).json()
    assert got["recall_count"] == 1
    assert got["stability_days"] > 1.0
    assert got["last_recall_at"].endswith("Z")

    recalled = client.post(f"/v1/facts/{fact['id']}/recall", headers=auth("default"))
    assert recalled.status_code == 200
    assert recalled.json()["recall_count"] == 2


def test_delete_is_204_then_404(client: TestClient, auth: Auth) -> None:
    fact = store(client, auth)
    url = f"/v1/facts/{fact['id']}"
    first = client.delete(url, headers=auth("default"))
    assert first.status_code == 204
    assert first.content == b""
    assert_problem(client.delete(url, headers=auth("default")), 404)
    assert_problem(client.get(url, headers=auth("default")), 404)
    deleted = client.get(url, params={"include_deleted": True}, headers=auth("default"))
    assert deleted.status_code == 200
    assert deleted.json()["deleted_at"].endswith("Z")
    listing = client.get("/v1/facts", headers=auth("default")).json()
    assert fact["id"] not in [f["id"] for f in listing["facts"]]


def test_supersede_history_and_second_supersede_is_409(
    client: TestClient, auth: Auth, fact_count
) -> None:
    old = store(client, auth, content="the port is 8000")
    new = store(client, auth, content="the port is 8420", supersedes_id=old["id"])
    assert new["supersedes_id"] == old["id"]
    before = fact_count()
    again = client.post(
        "/v1/facts",
        json={"path": "/projects/embornal", "content": "no, 9000", "supersedes_id": old["id"]},
        headers=auth("default"),
    )
    assert_problem(again, 409)
    assert fact_count() == before

    old_now = client.get(f"/v1/facts/{old['id']}", params={"peek": True}, headers=auth("default"))
    assert old_now.json()["superseded_by_id"] == new["id"]
    history = client.get(f"/v1/facts/{new['id']}/history", headers=auth("default")).json()
    assert [f["id"] for f in history["facts"]] == [old["id"], new["id"]]
    listing = client.get("/v1/facts", params={"under": "/projects"}, headers=auth("default"))
    assert [f["id"] for f in listing.json()["facts"]] == [new["id"]]


def test_supersede_unknown_fact_is_404(client: TestClient, auth: Auth, fact_count) -> None:
    before = fact_count()
    response = client.post(
        "/v1/facts",
        json={"path": "/a", "content": "x", "supersedes_id": 999_999},
        headers=auth("default"),
    )
    assert_problem(response, 404)
    assert fact_count() == before


def test_batch_stores_all(client: TestClient, auth: Auth) -> None:
    body = {"facts": [{"path": f"/batch/{i}", "content": f"fact {i}"} for i in range(3)]}
    response = client.post("/v1/facts/batch", json=body, headers=auth("default"))
    assert response.status_code == 201, response.text
    assert [f["path"] for f in response.json()["facts"]] == ["/batch/0", "/batch/1", "/batch/2"]


@pytest.mark.parametrize(
    ("bad", "loc"),
    [
        (
            {"path": "/ok", "content": "x", "tags": {"owner": "mallory"}},
            ["body", "facts", 1, "tags"],
        ),
        ({"path": "/Bad Path", "content": "x"}, ["body", "facts", 1, "path"]),
        ({"path": "/ok", "content": "   "}, ["body", "facts", 1, "content"]),
        ({"path": "/ok", "content": "x" * 4001}, ["body", "facts", 1, "content"]),
        ({"path": "/ok", "content": "x", "colour": "red"}, ["body", "facts", 1, "colour"]),
        ({"path": "/ok"}, ["body", "facts", 1, "content"]),
    ],
)
def test_batch_with_one_bad_item_writes_nothing(
    client: TestClient, auth: Auth, fact_count, bad: dict, loc: list
) -> None:
    before = fact_count()
    body = {"facts": [{"path": "/ok", "content": "fine"}, bad, {"path": "/ok", "content": "too"}]}
    problem = assert_problem(
        client.post("/v1/facts/batch", json=body, headers=auth("default")), 422
    )
    assert loc in [e["loc"] for e in problem["errors"]]
    assert fact_count() == before


def test_batch_conflict_late_in_the_batch_writes_nothing(
    client: TestClient, auth: Auth, fact_count
) -> None:
    old = store(client, auth)
    store(client, auth, supersedes_id=old["id"])
    before = fact_count()
    body = {
        "facts": [
            {"path": "/ok", "content": "first"},
            {"path": "/ok", "content": "second", "supersedes_id": old["id"]},
        ]
    }
    assert_problem(client.post("/v1/facts/batch", json=body, headers=auth("default")), 409)
    assert fact_count() == before


def test_batch_over_the_limit_is_422(client: TestClient, auth: Auth, fact_count) -> None:
    before = fact_count()
    body = {"facts": [{"path": "/a", "content": "x"}] * 1001}
    problem = assert_problem(
        client.post("/v1/facts/batch", json=body, headers=auth("default")), 422
    )
    assert "1000" in problem["detail"]
    assert fact_count() == before
    empty = client.post("/v1/facts/batch", json={"facts": []}, headers=auth("default"))
    assert_problem(empty, 422)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"path": "/a", "content": "x", "tags": {"owner": "default"}}, "tags"),
        ({"path": "/a", "content": "x", "tags": {"Owner": "me"}}, "tags"),
        ({"path": "/a", "content": "x", "extra": True}, "extra"),
        ({"path": "/a", "content": ""}, "content"),
        ({"path": "a", "content": "x"}, "path"),
        ({"path": "/a", "content": "x", "tags": {f"k{i}": "v" for i in range(33)}}, "tags"),
        ({"path": "/a", "content": "x", "tags": {"k": "two words"}}, "tags"),
        ({"path": "/a", "content": "x", "supersedes_id": 2**63}, "supersedes_id"),
        ({"path": "/a", "content": 5}, "content"),
    ],
)
def test_refused_store_writes_nothing(
    client: TestClient, auth: Auth, fact_count, body: dict, field: str
) -> None:
    before = fact_count()
    problem = assert_problem(client.post("/v1/facts", json=body, headers=auth("default")), 422)
    assert ["body", field] in [e["loc"] for e in problem["errors"]]
    assert fact_count() == before


def test_a_store_nobody_may_write_is_403_and_writes_nothing(
    client: TestClient, auth: Auth, fact_count
) -> None:
    before = fact_count()
    response = client.post("/v1/facts", json={"path": "/a", "content": "x"}, headers=auth("zed"))
    assert_problem(response, 403)
    assert fact_count() == before


def _pages(client: TestClient, auth: Auth, **params) -> list[list[dict]]:
    pages, cursor = [], None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        body = client.get("/v1/facts", params=query, headers=auth("default")).json()
        pages.append(body["facts"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.parametrize("sort", ["created", "strength"])
def test_list_pages_have_no_overlap_and_no_gap(
    client: TestClient, auth: Auth, clock: FakeClock, sort: str
) -> None:
    ids = []
    for i in range(8):
        ids.append(store(client, auth, path=f"/list/{i % 3}", content=f"fact {i}")["id"])
        clock.advance(seconds=3600 * (i % 2))  # some share a creation time: ties
    for fid in ids[:3]:
        client.post(f"/v1/facts/{fid}/recall", headers=auth("default"))
    clock.advance(days=1)

    pages = _pages(client, auth, under="/list", sort=sort, limit=3)
    assert [len(p) for p in pages] == [3, 3, 2]
    seen = [f["id"] for page in pages for f in page]
    assert sorted(seen) == sorted(ids)
    if sort == "created":
        assert seen == sorted(ids, reverse=True)
    else:
        strengths = [f["strength"] for page in pages for f in page]
        assert strengths == sorted(strengths, reverse=True)


def test_list_filters_by_tag_and_browsing_is_not_a_recall(client: TestClient, auth: Auth) -> None:
    tagged = store(client, auth, path="/t", tags={"topic": "db"})
    store(client, auth, path="/t", tags={"topic": "ui"})
    listing = client.get(
        "/v1/facts", params=[("tag", "topic=db"), ("tag", "owner=default")], headers=auth("default")
    ).json()
    assert [f["id"] for f in listing["facts"]] == [tagged["id"]]
    assert listing["facts"][0]["recall_count"] == 0
    assert listing["next_cursor"] is None


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 101},
        {"limit": 0},
        {"sort": "random"},
        {"cursor": "not-a-cursor"},
        {"under": "no-slash"},
        {"tag": "novalue"},
    ],
)
def test_bad_list_parameters_are_422(client: TestClient, auth: Auth, params: dict) -> None:
    problem = assert_problem(client.get("/v1/facts", params=params, headers=auth("default")), 422)
    assert problem["errors"], problem
    assert problem["errors"][0]["loc"][0] == "query"


def test_memory_facts_are_there(client: TestClient, auth: Auth) -> None:
    listing = client.get("/v1/facts", params={"under": "/memory"}, headers=auth("default"))
    assert len(listing.json()["facts"]) == MEMORY_FACTS
