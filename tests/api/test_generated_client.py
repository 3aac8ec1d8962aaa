"""A client generated from openapi.json by openapi-python-client works against the app."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Auth

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "embornal_generated_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    # A dev dependency: its absence is a broken install, not a reason to skip.
    assert GENERATOR.exists(), "openapi-python-client is missing: run `make test`"
    out = tmp_path_factory.mktemp("client")
    config = out / "config.yaml"
    config.write_text("post_hooks: []\n")  # no formatter needed to import the code
    subprocess.run(
        [
            str(GENERATOR), "generate", "--path", str(ROOT / "openapi.json"),
            "--output-path", str(out / PACKAGE), "--meta", "none", "--config", str(config),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        shutil.rmtree(out, ignore_errors=True)


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.{name}")


def test_store_read_and_supersede(generated: ModuleType, client: TestClient, auth: Auth) -> None:
    client.headers.update(auth("default"))
    api = generated.AuthenticatedClient(base_url=str(client.base_url), token="unused")
    api.set_httpx_client(client)  # the app over ASGI, with the token already in the headers
    models = _module("models")
    store_fact = _module("api.facts.store_fact")
    get_fact = _module("api.facts.get_fact")
    history = _module("api.facts.get_fact_history")
    get_path = _module("api.paths.get_path")

    tags = models.StoreInTags.from_dict({"lang": "en"})
    old = store_fact.sync(
        client=api, body=models.StoreIn(path="/Gen/Client", content="the port is 8000", tags=tags)
    )
    assert isinstance(old, models.StoredFact), old
    assert old.path == "/gen/client"
    assert old.tags.additional_properties == {"lang": "en", "owner": "default"}

    read = get_fact.sync(old.id, client=api, peek=True)
    assert isinstance(read, models.Fact)
    assert read.content == "the port is 8000"
    assert read.recall_count == 0

    new = store_fact.sync(
        client=api,
        body=models.StoreIn(path="/gen/client", content="the port is 8420", supersedes_id=old.id),
    )
    assert isinstance(new, models.StoredFact)
    assert new.supersedes_id == old.id

    again = store_fact.sync_detailed(
        client=api,
        body=models.StoreIn(path="/gen/client", content="9000?", supersedes_id=old.id),
    )
    assert again.status_code == 409
    # A store's 409 is a StoreConflict: a problem that names similar facts when the
    # refusal is on_duplicate's, and none for a supersede's (as here).
    assert isinstance(again.parsed, models.StoreConflict)
    assert again.parsed.status == 409
    assert isinstance(again.parsed.similar, generated.types.Unset)

    chain = history.sync(new.id, client=api)
    assert [f.id for f in chain.facts] == [old.id, new.id]

    node = get_path.sync("gen/client", client=api)
    assert isinstance(node, models.PathOut)
    assert node.path == "/gen/client"
    assert node.fact_count == 1

    missing = get_fact.sync_detailed(10**9, client=api)
    assert missing.status_code == 404
    assert isinstance(missing.parsed, models.Problem)
