"""`similar` and `on_duplicate` on POST /v1/facts and /v1/facts/batch."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from tests.api.conftest import Auth, assert_problem
from tests.conftest import TEST_WIDTH

BACKUP = "the staging database is backed up every night at two"
AGAIN = "every night at two the staging database is backed up"


@pytest.fixture
def model(rt: Runtime) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)


def post(client: TestClient, auth: Auth, subject: str, url: str, body: dict):
    return client.post(url, json=body, headers=auth(subject))


def test_a_store_names_the_similar_fact_and_refuse_writes_nothing(
    client, auth, model, fact_count
) -> None:
    first = post(client, auth, "default", "/v1/facts", {"path": "/ops", "content": BACKUP})
    assert first.status_code == 201, first.text
    assert first.json()["similar"] == [] and first.json()["similar_checked"] is True
    again = post(client, auth, "default", "/v1/facts", {"path": "/ops", "content": AGAIN})
    assert again.status_code == 201
    (hit,) = again.json()["similar"]
    assert (hit["id"], hit["path"]) == (first.json()["id"], "/ops") and hit["cosine"] >= 0.63
    other = post(
        client, auth, "default", "/v1/facts", {"path": "/ops", "content": "plants need water"}
    )
    assert other.json()["similar"] == []
    before = fact_count()
    body = {"path": "/ops", "content": AGAIN, "on_duplicate": "refuse"}
    problem = assert_problem(post(client, auth, "default", "/v1/facts", body), 409)
    assert f"fact {first.json()['id']} at /ops" in problem["detail"]
    # Machine-readable as in a 201: an agent supersedes without parsing the prose.
    named = {first.json()["id"], again.json()["id"]}
    assert {s["id"] for s in problem["similar"]} == named
    assert all(
        set(s) == {"id", "path", "cosine"} and s["path"] == "/ops" for s in problem["similar"]
    )
    assert problem["similar"][0]["id"] == first.json()["id"]  # the one the detail names
    assert "index" not in problem
    batch = {
        "facts": [{"path": "/n", "content": "a new thing"}, {"path": "/ops", "content": AGAIN}]
    }
    refused = post(client, auth, "default", "/v1/facts/batch", {**batch, "on_duplicate": "refuse"})
    problem = assert_problem(refused, 409)
    assert "fact 1 of the batch" in problem["detail"]
    assert problem["index"] == 1 and {s["id"] for s in problem["similar"]} == named
    assert fact_count() == before
    stored = post(client, auth, "default", "/v1/facts/batch", batch)
    assert stored.status_code == 201, stored.text
    assert [len(f["similar"]) for f in stored.json()["facts"]] == [0, 2]
    bad = post(client, auth, "default", "/v1/facts", {**body, "on_duplicate": "skip"})
    assert_problem(bad, 422)


def test_a_similar_fact_the_writer_cannot_read_is_never_named(
    client, auth, model, add_policy, fact_count
) -> None:
    hidden = post(client, auth, "default", "/v1/facts", {"path": "/private", "content": BACKUP})
    add_policy("p, alice, path:/alice/*, write, allow", "p, alice, path:/alice/*, read, allow")
    body = {"path": "/alice", "content": AGAIN}
    mine = post(client, auth, "alice", "/v1/facts", body)
    assert mine.status_code == 201, mine.text
    assert mine.json()["similar"] == [] and mine.json()["similar_checked"] is True
    # refuse: her own copy is the one named, the hidden one never
    problem = assert_problem(
        post(client, auth, "alice", "/v1/facts", {**body, "on_duplicate": "refuse"}), 409
    )
    assert f"fact {mine.json()['id']} at /alice" in problem["detail"]
    assert (
        "/private" not in problem["detail"]
        and f"fact {hidden.json()['id']} " not in problem["detail"]
    )


def test_without_a_model_similar_is_not_checked(client, auth) -> None:
    got = post(client, auth, "default", "/v1/facts", {"path": "/ops", "content": BACKUP})
    assert got.json()["similar"] == [] and got.json()["similar_checked"] is False
