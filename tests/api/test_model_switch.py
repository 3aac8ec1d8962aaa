"""A running server follows `embornal model use` done from the command line.

The server's config names a model (the default, its files not here, so none is loaded):
a process configured with `embedding.model: none` follows no switch at all
(tests/api/test_no_model_by_config.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app import cli
from app.embeddings.catalog import ModelSpec
from app.runtime import Runtime
from app.settings import EmbeddingSettings, Settings
from tests.api.conftest import Auth
from tests.conftest import TEST_WIDTH, TINY, TINY_WIDTH, same_memory

CONFIGURED = EmbeddingSettings().model


@pytest.fixture
def settings(home: Path, fresh_memory: Callable[[Path], Settings]) -> Settings:
    """The server's settings name a model, at the memory's width: it follows switches."""
    return same_memory(fresh_memory(home), embedding={"model": CONFIGURED, "width": TEST_WIDTH})


@pytest.fixture
def cli_env(home: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line on the same memory as the server: EMBORNAL_HOME is `home`, and
    on PostgreSQL the same database URL."""
    monkeypatch.setenv("EMBORNAL_HOME", str(home))
    if settings.database.url is not None:
        monkeypatch.setenv("EMBORNAL_DATABASE__URL", str(settings.database.url))
    for name in ("EMBORNAL_EMBEDDING__MODEL", "EMBORNAL_EMBEDDING__WIDTH"):
        monkeypatch.delenv(name, raising=False)
    # The CLI keeps its settings between commands of one process; this is a new one.
    monkeypatch.setattr(cli.state, "settings", None)


def test_the_server_loads_the_model_the_cli_switched_to(
    client: TestClient, auth: Auth, rt: Runtime, tiny_model: ModelSpec, cli_env: None
) -> None:
    rt.load_model(download=False)  # as `serve` does: its files are not here
    before = client.get("/readyz").json()["model"]
    assert before["loaded"] is False and before["name"] == CONFIGURED, before

    switched = CliRunner().invoke(cli.app, ["model", "use", TINY])
    assert switched.exit_code == 0, switched.output

    # The next request sees the switch: readiness names the model the CLI chose ...
    assert client.get("/readyz").json()["model"] == {"loaded": True, "name": TINY, "reason": None}
    # ... and the verbs embed with it, at its width.
    stored = client.post(
        "/v1/facts", json={"path": "/m", "content": "tiny vectors"}, headers=auth("default")
    )
    assert stored.status_code == 201 and stored.json()["embedded"] is True
    found = client.get(
        "/v1/search",
        params={"q": "tiny vectors", "mode": "semantic", "limit": 100},
        headers=auth("default"),
    ).json()
    assert found["mode"] == "semantic"
    by_id = {r["fact"]["id"]: r for r in found["results"]}
    assert stored.json()["id"] in by_id
    # The 7 /memory facts were re-embedded by `model use`: all 8 are found by meaning.
    assert len(by_id) == 8
    assert all(-1.0 <= r["scores"]["cosine"] <= 1.0 for r in found["results"])
    assert tiny_model.width == TINY_WIDTH


def test_a_search_follows_a_switch_from_one_model_to_another(
    client: TestClient, auth: Auth, home: Path, tiny_model: ModelSpec, cli_env: None
) -> None:
    """A search embeds with the loaded model before it opens a transaction, and asks in
    its snapshot whether the memory still names that model: after a switch it loads
    the new one and embeds again, so no query is ranked with the old model's vector."""
    from app.embeddings.catalog import register_spec, unregister_spec
    from tests.onnx_factory import make_tiny_model_dir, tiny_spec

    other = tiny_spec("tiny-16", 16, seed=3)
    register_spec(other)
    make_tiny_model_dir(home / "tiny-16", 16, seed=3)
    try:
        for name, width in ((TINY, TINY_WIDTH), ("tiny-16", 16)):
            switched = CliRunner().invoke(cli.app, ["model", "use", name])
            assert switched.exit_code == 0, switched.output
            # No /readyz first: the search itself finds the switch.
            found = client.get(
                "/v1/search",
                params={"q": "memory", "mode": "semantic", "limit": 100},
                headers=auth("default"),
            )
            assert found.status_code == 200, found.text
            assert len(found.json()["results"]) == 7  # the /memory facts, re-embedded
            model = client.get("/readyz").json()["model"]
            assert model == {"loaded": True, "name": name, "reason": None}
            assert other.width == 16 and width in (TINY_WIDTH, 16)
    finally:
        unregister_spec("tiny-16")


def test_a_store_follows_a_switch_from_one_model_to_another(
    client: TestClient, auth: Auth, home: Path, tiny_model: ModelSpec, cli_env: None
) -> None:
    """A store embeds with the loaded model and asks in its own transactions whether
    the memory still names it (no read of its own first): after a switch it loads the
    new model and embeds again, so no fact is written with the old model's vector."""
    from app.embeddings.catalog import register_spec, unregister_spec
    from tests.onnx_factory import make_tiny_model_dir, tiny_spec

    other = tiny_spec("tiny-16", 16, seed=3)
    register_spec(other)
    make_tiny_model_dir(home / "tiny-16", 16, seed=3)
    try:
        for name in (TINY, "tiny-16"):
            switched = CliRunner().invoke(cli.app, ["model", "use", name])
            assert switched.exit_code == 0, switched.output
            # No /readyz nor search first: the store itself finds the switch.
            stored = client.post(
                "/v1/facts",
                json={"path": "/m", "content": f"stored under {name}"},
                headers=auth("default"),
            )
            assert stored.status_code == 201, stored.text
            assert stored.json()["embedded"] is True and stored.json()["similar_checked"] is True
            found = client.get(
                "/v1/search",
                params={"q": f"stored under {name}", "mode": "semantic", "limit": 100},
                headers=auth("default"),
            ).json()
            # Every fact of the memory has a vector of the model it names now: the ones
            # `model use` re-embedded and the one just stored.
            assert stored.json()["id"] in {r["fact"]["id"] for r in found["results"]}
            assert client.get("/readyz").json()["model"]["name"] == name
    finally:
        unregister_spec("tiny-16")
