"""`embedding.model: none` is the owner's choice for the process: on a memory whose facts
hold vectors of another model (and width), it starts, loads no model and follows none
(not even the one the memory names), searches by keyword, answers a search by meaning
with the no-model 503, and stores facts that wait for embedding.

A process with a named model still follows `embornal model use` from another process
(tests/api/test_model_switch.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db import migrate
from app.db.engine import read_transaction
from app.embeddings.catalog import ModelSpec
from app.embeddings.loader import NO_MODEL_REASON
from app.errors import Unavailable
from app.main import create_app
from app.runtime import Runtime, open_runtime
from app.services import embedding as embedding_service
from app.settings import EmbeddingSettings, Settings
from app.usecases.memory import Memory, NewFact, SearchRequest
from tests.api.conftest import Auth, assert_problem
from tests.conftest import TEST_WIDTH, TINY, TINY_WIDTH, same_memory

KETTLE = "the kettle on the stove is blue"


@pytest.fixture
def embedded(settings: Settings, tiny_model: ModelSpec) -> Settings:
    """The memory moved to the tiny model (32-d) and every fact embedded, as `embornal
    model use` leaves it; its own fact stored with a vector."""
    named = same_memory(settings, embedding={"model": TINY, "width": TINY_WIDTH})
    rt = open_runtime(named, load_model=True, check_width=False)
    try:
        memory = Memory(rt)
        memory.reindex(rebuild=True)
        assert memory.store("default", NewFact("/home", KETTLE)).embedded
    finally:
        rt.close()
    return settings


def no_model(settings: Settings, **embedding: Any) -> Settings:
    """Settings for the memory of `settings` whose config says `embedding.model: none`,
    and the width only when given (as in a config.yaml that names none and no width)."""
    config = EmbeddingSettings(model="none", download=False, **embedding)
    return same_memory(settings).model_copy(update={"embedding": config})


# The config's width: none given (its default, 768, is not the memory's 32), and the
# memory's own.
WIDTHS = [pytest.param({}, id="no-width"), pytest.param({"width": TINY_WIDTH}, id="its-width")]


@pytest.fixture(params=WIDTHS)
def served(embedded: Settings, request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """A server's runtime (the model loaded as `serve` loads it) with no model configured."""
    rt = open_runtime(no_model(embedded, **request.param), load_model=True, download=False)
    yield rt
    rt.close()


def memory_names(rt: Runtime) -> tuple[str | None, int | None, bool]:
    with read_transaction(rt.engine) as conn:
        return (
            migrate.stored_model(conn),
            migrate.stored_width(conn),
            embedding_service.any_embedded(conn),
        )


def test_a_memory_with_vectors_opens_with_no_model_configured(served: Runtime) -> None:
    # Before: "embedding width disagreement: config says 64, the memory (meta) holds 32".
    assert served.embedder is None and served.model_problem == NO_MODEL_REASON
    # The width that counts is the memory's: nothing here gives vectors of another.
    assert served.settings.embedding.model == "none"
    assert served.settings.embedding.width == TINY_WIDTH
    assert memory_names(served) == (TINY, TINY_WIDTH, True)  # the memory is left as it was


def test_the_app_searches_by_keyword_and_loads_no_model(
    served: Runtime, settings: Settings, auth: Auth
) -> None:
    app = create_app(served.settings, runtime=served)
    with TestClient(app, raise_server_exceptions=False) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        # What a fresh memory with no model configured says: no model, by configuration.
        assert ready.json()["model"] == {"loaded": False, "name": None, "reason": NO_MODEL_REASON}

        found = client.get("/v1/search", params={"q": "kettle"}, headers=auth("default"))
        assert found.status_code == 200, found.text
        assert found.json()["mode"] == "keyword"  # the default with no model
        assert [r["fact"]["content"] for r in found.json()["results"]] == [KETTLE]

        for mode in ("semantic", "hybrid"):
            refused = client.get(
                "/v1/search", params={"q": "kettle", "mode": mode}, headers=auth("default")
            )
            problem = assert_problem(refused, 503)
            assert problem["detail"] == f"{mode} search needs an embedding model: {NO_MODEL_REASON}"

        stored = client.post(
            "/v1/facts",
            json={"path": "/home", "content": "the pot is red"},
            headers=auth("default"),
        )
        assert stored.status_code == 201, stored.text
        assert stored.json()["embedded"] is False  # it waits for a process with a model

        # Before: the server loaded the memory's model on its first request, and said so.
        again = client.get("/readyz").json()["model"]
        assert again == {"loaded": False, "name": None, "reason": NO_MODEL_REASON}
    assert served.embedder is None
    with read_transaction(served.engine) as conn:
        assert embedding_service.pending_count(conn) == 1


def test_no_model_configured_follows_no_model(
    served: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """follow_model, and the searches and stores that call it, load nothing: not the
    model the memory names, which a process with a named model would load."""

    def load_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a process with no model configured loaded one")

    monkeypatch.setattr("app.runtime.loader.load_model", load_model)
    served.follow_model()
    assert served.embedder is None and served.model.name == "none"

    memory = Memory(served)
    for mode in ("semantic", "hybrid"):
        with pytest.raises(Unavailable, match=r"embedding\.model: none"):
            memory.search("default", SearchRequest(q="kettle", mode=mode))
    page = memory.search("default", SearchRequest(q="kettle"))
    assert page.mode == "keyword" and [r.fact.content for r in page.results] == [KETTLE]
    assert memory.store("default", NewFact("/home", "the pot is red")).embedded is False
    assert memory.start_embedding_worker() is None
    assert served.embedder is None and served.model.name == "none"


def test_a_memory_with_no_vectors_keeps_its_width_with_no_model(settings: Settings) -> None:
    """Nothing moves for a memory that never had a model: the width is what it was."""
    rt = open_runtime(no_model(settings), load_model=True)
    try:
        assert rt.settings.embedding.width == TEST_WIDTH
        assert memory_names(rt) == (None, TEST_WIDTH, False)
    finally:
        rt.close()
