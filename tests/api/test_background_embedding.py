"""A server started with a model embeds the facts that wait, with no command."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.embeddings.fake import FakeEmbedder
from app.main import create_app
from app.runtime import Runtime
from tests.api.conftest import Auth
from tests.conftest import TEST_WIDTH
from tests.services.test_embed_worker import WAIT, pending


def test_a_fresh_memory_started_with_a_model_embeds_its_starter_facts(
    settings, rt: Runtime, clock, auth: Auth
) -> None:
    assert pending(rt) == 7  # the migration's /memory facts, written without a model
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    app = create_app(settings, runtime=rt, clock=clock)
    with TestClient(app) as client:
        worker = app.state.embed_worker
        assert worker.wait_idle(WAIT), "the worker never found the queue empty"
        assert worker.embedded == 7
        assert pending(rt) == 0
        found = client.get(
            "/v1/search",
            params={"q": "a fact never changes, to correct one", "mode": "semantic", "peek": True},
            headers=auth("default"),
        ).json()
        top = found["results"][0]["fact"]
        assert top["path"] == "/memory" and top["embedded"] is True
        assert "supersedes_id" in top["content"]
    assert not worker._thread.is_alive()  # stopped with the app


def test_no_worker_without_a_model(settings, rt: Runtime, clock) -> None:
    app = create_app(settings, runtime=rt, clock=clock)
    with TestClient(app):
        assert app.state.embed_worker is None
