"""Search over HTTP: GET and POST forms, modes, filters, recalls, limits."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from tests.api.conftest import Auth, assert_problem
from tests.conftest import TEST_WIDTH


def _store(client: TestClient, auth: Auth, path: str, content: str, **extra) -> dict:
    body = {"path": path, "content": content, **extra}
    response = client.post("/v1/facts", json=body, headers=auth("default"))
    assert response.status_code == 201, response.text
    return response.json()


def test_keyword_search_get_and_post(client: TestClient, auth: Auth) -> None:
    target = _store(client, auth, "/ops", "the outage is tracked as OPS-48213")
    _store(client, auth, "/ops", "routine maintenance note")
    got = client.get("/v1/search", params={"q": "OPS-48213"}, headers=auth("default"))
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["mode"] == "keyword"  # no model loaded: keyword is the default
    assert body["results"][0]["fact"]["id"] == target["id"]
    scores = body["results"][0]["scores"]
    assert scores["keyword"] == body["results"][0]["score"] > 0 and scores["all_words"] is True
    assert body["results"][0]["fact"]["recall_count"] == 1  # a search hands content out

    posted = client.post(
        "/v1/search",
        json={"q": "OPS-48213", "peek": True, "under": "/ops"},
        headers=auth("default"),
    )
    assert posted.status_code == 200, posted.text
    assert posted.json()["results"][0]["fact"]["recall_count"] == 1  # peek: no second recall


def test_search_filters(client: TestClient, auth: Auth) -> None:
    a = _store(client, auth, "/x/a", "shared words here", tags={"team": "red"})
    b = _store(client, auth, "/y/b", "shared words here", tags={"team": "blue"})
    under = client.get("/v1/search", params={"q": "shared", "under": "/x"}, headers=auth("default"))
    assert [r["fact"]["id"] for r in under.json()["results"]] == [a["id"]]
    tagged = client.get(
        "/v1/search", params={"q": "shared", "tag": "team=blue"}, headers=auth("default")
    )
    assert [r["fact"]["id"] for r in tagged.json()["results"]] == [b["id"]]


@pytest.mark.parametrize(
    "params",
    [
        {"q": "x", "limit": 101},
        {"q": "x", "limit": 0},
        {"q": ""},
        {},
        {"q": "x", "mode": "psychic"},
        {"q": "x", "min_strength": 2},
        {"q": "x", "tag": "nokey"},
        {"q": "x", "under": "relative"},
    ],
)
def test_bad_search_parameters_are_422(client: TestClient, auth: Auth, params: dict) -> None:
    problem = assert_problem(client.get("/v1/search", params=params, headers=auth("default")), 422)
    assert problem["errors"][0]["loc"][0] == "query"


def test_post_search_refuses_unknown_fields_and_big_limits(client: TestClient, auth: Auth) -> None:
    for body in ({"q": "x", "colour": "red"}, {"q": "x", "limit": 101}):
        response = client.post("/v1/search", json=body, headers=auth("default"))
        assert_problem(response, 422)


def test_semantic_without_a_model_is_503_saying_why(
    client: TestClient, auth: Auth, rt: Runtime
) -> None:
    rt.model_problem = "no embedding model is configured (embedding.model: none)"
    response = client.get(
        "/v1/search", params={"q": "x", "mode": "semantic"}, headers=auth("default")
    )
    problem = assert_problem(response, 503)
    assert "embedding.model: none" in problem["detail"]


def test_with_a_model_stores_embed_and_hybrid_is_the_default(
    client: TestClient, auth: Auth, rt: Runtime
) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    fact = _store(client, auth, "/pets", "the cat sleeps on the warm windowsill")
    _store(client, auth, "/pets", "dogs bark at the mail carrier")
    assert fact["embedded"] is True
    response = client.get("/v1/search", params={"q": "cat windowsill"}, headers=auth("default"))
    body = response.json()
    assert body["mode"] == "hybrid"
    assert body["results"][0]["fact"]["id"] == fact["id"]
    assert 0 < body["results"][0]["scores"]["relevance"] <= 1
    semantic = client.get(
        "/v1/search", params={"q": "cat windowsill", "mode": "semantic"}, headers=auth("default")
    ).json()
    assert semantic["results"][0]["scores"]["cosine"] is not None


HOSTILE = [
    '"unbalanced',
    "((((",
    "a AND OR NOT b",
    "NEAR(a b, 3)",
    "col:value*",
    "^start -x",
    "nul\x00byte",
    "'; DROP TABLE facts; --",
    "x" * 3000,
    " ".join(["the"] * 700),
    "\\",
]


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_hostile_queries_never_give_a_5xx(
    client: TestClient, auth: Auth, rt: Runtime, mode: str
) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    _store(client, auth, "/h", "a start value and the colon")
    for q in HOSTILE:
        for response in (
            client.get("/v1/search", params={"q": q, "mode": mode}, headers=auth("default")),
            client.post("/v1/search", json={"q": q, "mode": mode}, headers=auth("default")),
        ):
            assert response.status_code < 500, (q[:40], response.text)
            if response.status_code >= 400:
                assert response.headers["content-type"].startswith("application/problem+json")
            else:
                assert isinstance(response.json()["results"], list)


def test_a_readers_keyword_scores_do_not_move_when_hidden_facts_arrive(
    client: TestClient, auth: Auth, add_policy
) -> None:
    add_policy("p, alice, path:/alice/*, read, allow")
    for word in ("one", "two"):
        _store(client, auth, "/alice/notes", f"kestrel nest {word}")
    _store(client, auth, "/alice/notes", "kestrel sighting")

    def alice_search() -> list[tuple[int, dict]]:
        response = client.get(
            "/v1/search",
            params={"q": "kestrel nest", "peek": True, "mode": "keyword"},
            headers=auth("alice"),
        )
        assert response.status_code == 200, response.text
        return [(r["fact"]["id"], r["scores"]) for r in response.json()["results"]]

    before = alice_search()
    assert [scores["all_words"] for _, scores in before] == [True, True, False]
    hidden = [{"path": "/bob", "content": f"kestrel nest nest {i}"} for i in range(200)]
    response = client.post("/v1/facts/batch", json={"facts": hidden}, headers=auth("default"))
    assert response.status_code == 201, response.text
    assert alice_search() == before


@pytest.mark.parametrize("q", ["\x00", "port\x00", "\x1b[2J port", "port\x7f"])
def test_a_query_holding_a_control_character_is_refused(
    client: TestClient, auth: Auth, q: str
) -> None:
    """Issue 18: a NUL or escape in q reached FTS5 as nothing and matched every fact."""
    for response in (
        client.get("/v1/search", params={"q": q}, headers=auth("default")),
        client.post("/v1/search", json={"q": q}, headers=auth("default")),
    ):
        problem = assert_problem(response, 422)
        assert "control character" in problem["detail"]
        assert problem["errors"][0]["loc"][-1] == "q"
    # A question pasted over two lines is still a question.
    multi_line = client.get("/v1/search", params={"q": "which\nport"}, headers=auth("default"))
    assert multi_line.status_code == 200


def test_casbin_keeps_policies_and_decisions_out_of_the_log_at_info(
    client: TestClient, auth: Auth, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 18: Casbin printed the model, the policy table and decisions at INFO."""
    import logging

    from app.api.observability import configure_logging

    with caplog.at_level(logging.INFO):
        client.get("/v1/search", params={"q": "port"}, headers=auth("stranger"))
        client.get("/v1/facts", headers=auth("default"))
    assert not [r for r in caplog.records if r.name.startswith("casbin")]
    assert "path:/*" not in caplog.text
    root, casbin_log = logging.getLogger(), logging.getLogger("casbin")
    saved = root.handlers[:], root.level
    try:
        configure_logging("text", "info")
        assert casbin_log.getEffectiveLevel() == logging.ERROR
        configure_logging("text", "debug")  # the debug setting may show them
        assert casbin_log.getEffectiveLevel() == logging.DEBUG
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
        casbin_log.setLevel(logging.ERROR)


@pytest.mark.parametrize("q", ["what happened 3000000 days ago", "the plan on December 31st 9999"])
def test_a_time_span_beyond_any_date_is_a_200_in_every_mode(
    client: TestClient, auth: Auth, rt: Runtime, q: str
) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    _store(client, auth, "/plans", "the plan for the garden")
    for mode in ("keyword", "semantic", "hybrid"):
        for response in (
            client.get("/v1/search", params={"q": q, "mode": mode}, headers=auth("default")),
            client.post("/v1/search", json={"q": q, "mode": mode}, headers=auth("default")),
        ):
            assert response.status_code == 200, (mode, response.text)
