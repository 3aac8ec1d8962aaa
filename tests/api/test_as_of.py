"""`as_of` over HTTP: list, search (GET and POST, every mode), get and history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from app.embeddings.fake import FakeEmbedder
from app.rules import AS_OF_TODAY
from app.runtime import Runtime
from tests.api.conftest import Auth, assert_problem
from tests.conftest import DAY, TEST_WIDTH, FakeClock

MODES = ("keyword", "semantic", "hybrid")


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def story(client: TestClient, auth: Auth, rt: Runtime, clock: FakeClock) -> dict:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    me = auth("default")

    def store(body: dict) -> dict:
        response = client.post("/v1/facts", json=body, headers=me)
        assert response.status_code == 201, response.text
        return response.json()

    old = store({"path": "/h", "content": "heron roosts by the mill pond"})
    gone = store({"path": "/h", "content": "heron fishes at the weir"})
    clock.advance(days=1)
    t1 = clock()
    clock.advance(days=1)
    new = store({"path": "/h", "content": "heron roosts by the canal", "supersedes_id": old["id"]})
    assert client.delete(f"/v1/facts/{gone['id']}", headers=me).status_code == 204
    clock.advance(days=1)
    # Each fact holds two or three of the search's words: well above hybrid's floor, so
    # that which facts a page holds is decided by as_of alone, whatever the fitted model.
    late = store({"path": "/h", "content": "heron roosts in the reeds"})
    return {"t1": iso(t1), "t3": iso(clock()), "old": old, "new": new, "gone": gone, "late": late}


@pytest.mark.parametrize("mode", MODES)
def test_search_as_of_answers_as_the_memory_stood(client, auth, story, mode) -> None:
    q = "heron roosts pond canal weir reeds"
    params = {"q": q, "mode": mode, "as_of": story["t1"]}
    got = client.get("/v1/search", params=params, headers=auth("default"))
    assert got.status_code == 200, got.text
    body = got.json()
    assert {r["fact"]["id"] for r in body["results"]} == {story["old"]["id"], story["gone"]["id"]}
    assert body["as_of"] == {"at": story["t1"], "today": list(AS_OF_TODAY)}
    old = next(r["fact"] for r in body["results"] if r["fact"]["id"] == story["old"]["id"])
    assert old["superseded"] is False and old["superseded_by_id"] is None
    assert old["recall_count"] == 0  # an as_of search is never a recall
    posted = client.post(
        "/v1/search", json={"q": q, "mode": mode, "as_of": story["t3"]}, headers=auth("default")
    )
    assert posted.status_code == 200, posted.text
    found = {r["fact"]["id"] for r in posted.json()["results"]}
    assert found == {story["new"]["id"], story["late"]["id"]}
    plain = client.get("/v1/search", params={"q": q, "mode": mode}, headers=auth("default"))
    assert plain.json()["as_of"] is None


def test_list_get_and_history_as_of(client, auth, story) -> None:
    me = auth("default")
    listed = client.get("/v1/facts", params={"under": "/h", "as_of": story["t1"]}, headers=me)
    assert listed.status_code == 200, listed.text
    assert {f["id"] for f in listed.json()["facts"]} == {story["old"]["id"], story["gone"]["id"]}
    assert all(f["deleted_at"] is None for f in listed.json()["facts"])
    gone = story["gone"]["id"]
    got = client.get(f"/v1/facts/{gone}", params={"as_of": story["t1"]}, headers=me)
    assert got.status_code == 200 and got.json()["recall_count"] == 0
    assert_problem(client.get(f"/v1/facts/{gone}", params={"as_of": story["t3"]}, headers=me), 404)
    late = story["late"]["id"]
    assert_problem(client.get(f"/v1/facts/{late}", params={"as_of": story["t1"]}, headers=me), 404)
    old = story["old"]["id"]
    chain = client.get(f"/v1/facts/{old}/history", params={"as_of": story["t1"]}, headers=me)
    assert chain.status_code == 200, chain.text
    assert [f["id"] for f in chain.json()["facts"]] == [old]
    assert chain.json()["as_of"]["at"] == story["t1"]
    whole = client.get(f"/v1/facts/{old}/history", headers=me).json()
    assert [f["id"] for f in whole["facts"]] == [old, story["new"]["id"]]
    assert (
        client.get(f"/v1/facts/{old}", params={"peek": True}, headers=me).json()["recall_count"]
        == 0
    )


def test_a_hidden_fact_stays_hidden_as_of_any_moment(client, auth, story) -> None:
    for moment in (story["t1"], story["t3"]):
        for mode in MODES:
            params = {"q": "heron roosts", "mode": mode, "as_of": moment}
            got = client.get("/v1/search", params=params, headers=auth("mallory"))
            assert got.status_code == 200 and got.json()["results"] == []
        listed = client.get(
            "/v1/facts", params={"under": "/h", "as_of": moment}, headers=auth("mallory")
        )
        assert listed.json()["facts"] == []
        old = story["old"]["id"]
        params = {"as_of": moment}
        assert_problem(client.get(f"/v1/facts/{old}", params=params, headers=auth("mallory")), 404)
        history = client.get(f"/v1/facts/{old}/history", params=params, headers=auth("mallory"))
        assert_problem(history, 404)


@pytest.mark.parametrize(
    ("as_of", "said"),
    [
        ("2026-12-01T09:30:00", "timezone"),
        ("1800000000", "RFC 3339"),
        ("2001-01-01T00:00:00Z", "before this memory began"),
        ("2099-01-01T00:00:00Z", "future"),
        # Valid RFC 3339 whose UTC falls outside what a date can hold: was a 500.
        ("0001-01-01T00:00:00+14:00", "outside"),
        ("9999-12-31T23:59:59-14:00", "outside"),
    ],
)
def test_a_bad_as_of_is_a_422_naming_it(client, auth, as_of, said) -> None:
    me = auth("default")
    for response in (
        client.get("/v1/facts", params={"as_of": as_of}, headers=me),
        client.get("/v1/search", params={"q": "x", "as_of": as_of}, headers=me),
        client.post("/v1/search", json={"q": "x", "as_of": as_of}, headers=me),
        client.get("/v1/facts/1", params={"as_of": as_of}, headers=me),
        client.get("/v1/facts/1/history", params={"as_of": as_of}, headers=me),
    ):
        body = assert_problem(response, 422)
        assert said in body["detail"]
        assert body["errors"][0]["loc"][-1] == "as_of"


def test_the_moment_is_normalised_to_utc(client, auth, clock) -> None:
    at = clock() - DAY
    shifted = datetime.fromtimestamp(at, timezone(timedelta(hours=2))).isoformat()
    assert shifted.endswith("+02:00")
    got = client.get("/v1/facts", params={"as_of": shifted}, headers=auth("default"))
    assert got.status_code == 200, got.text
    assert got.json()["as_of"]["at"] == iso(at)
