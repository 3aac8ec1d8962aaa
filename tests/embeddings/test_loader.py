"""load_embedder, model_info and pull_model, with a tiny registered model and the catalog."""

from __future__ import annotations

import pytest

from app.embeddings.base import Embedder, ModelUnavailable
from app.embeddings.catalog import (
    BGE_REVISION,
    CATALOG,
    NO_MODEL,
    ModelSpec,
    get_spec,
    register_spec,
    unregister_spec,
)
from app.embeddings.fetch import file_url
from app.embeddings.loader import load_embedder, model_info, pull_model
from app.embeddings.onnx_embedder import OnnxEmbedder
from app.errors import ConfigError
from tests.embeddings._support import FileServer, MakeSettings
from tests.onnx_factory import (
    make_tiny_model_dir,
    minilm_tokenizer_path,
    tiny_model_bytes,
    tiny_spec,
)


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    spec = tiny_spec("tiny-load", 40)
    monkeypatch.setitem(CATALOG, spec.name, spec)
    return spec


def test_none_means_no_embedder(settings_with: MakeSettings) -> None:
    settings = settings_with(model=NO_MODEL)
    assert load_embedder(settings) is None
    info = model_info(settings)
    assert info["name"] == NO_MODEL
    assert info["width"] is None


def test_unknown_model_is_a_config_error_listing_known_names(settings_with: MakeSettings) -> None:
    with pytest.raises(ConfigError) as caught:
        load_embedder(settings_with(model="bge-bass"))
    message = caught.value.detail
    assert "bge-bass" in message
    for name in ("bge-base-en-v1.5", "minilm-l6", "none"):
        assert name in message


def test_loads_a_registered_model_from_the_weights_dir(
    tiny: ModelSpec, settings_with: MakeSettings
) -> None:
    settings = settings_with(model=tiny.name, threads=1, batch_size=4)
    make_tiny_model_dir(settings.dirs.weights_dir / tiny.name, 40)
    embedder = load_embedder(settings)
    assert isinstance(embedder, OnnxEmbedder)
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.width, embedder.batch_size) == (tiny.name, 40, 4)
    assert embedder.embed_documents(["a", "b", "c", "d", "e"]).shape == (5, 40)


def spinning_stops(embedder: Embedder | None) -> bool:
    """Whether the model's session stops its threads spinning as each run returns."""
    assert isinstance(embedder, OnnxEmbedder)
    options = embedder._session.get_session_options()
    try:
        return options.get_session_config_entry("session.force_spinning_stop") == "1"
    except Exception:  # onnxruntime raises for a key never set
        return False


def test_the_model_yields_its_cores_after_each_run_beside_a_database_server(
    tiny: ModelSpec, settings_with: MakeSettings
) -> None:
    """With the memory on PostgreSQL the server's processes want the cores right after
    an embedding (hybrid's halves run there side by side): onnxruntime's threads stop
    spinning as each run returns. With SQLite they keep onnxruntime's default."""
    settings = settings_with(model=tiny.name, threads=1)
    make_tiny_model_dir(settings.dirs.weights_dir / tiny.name, 40)
    assert not spinning_stops(load_embedder(settings))
    on_server = settings.model_copy(
        update={"database": settings.database.model_copy(update={"url": "postgresql://db/m"})}
    )
    yielding = load_embedder(on_server)
    assert spinning_stops(yielding)
    assert yielding is not None and yielding.embed_documents(["a", "b"]).shape == (2, 40)
    assert spinning_stops(load_embedder(settings, yield_cores=True))


def test_missing_files_without_downloads_say_what_to_do(
    tiny: ModelSpec, settings_with: MakeSettings
) -> None:
    with pytest.raises(ModelUnavailable, match=r"model files missing.*`embornal model pull`"):
        load_embedder(settings_with(model=tiny.name))


def test_a_model_that_fails_to_load_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, settings_with: MakeSettings
) -> None:
    import hashlib
    from dataclasses import replace

    garbage = b"this is not an onnx model"
    spec = tiny_spec("tiny-broken", 8)
    broken = replace(
        spec,
        files=(
            replace(
                spec.file("model.onnx"),
                sha256=hashlib.sha256(garbage).hexdigest(),
                size=len(garbage),
            ),
            spec.file("tokenizer.json"),
        ),
    )
    monkeypatch.setitem(CATALOG, broken.name, broken)
    settings = settings_with(model=broken.name)
    model_dir = make_tiny_model_dir(settings.dirs.weights_dir / broken.name, 8)
    (model_dir / "model.onnx").write_bytes(garbage)
    with pytest.raises(ModelUnavailable, match="model 'tiny-broken' failed to load"):
        load_embedder(settings)


def test_model_info_reports_files_before_and_after(
    tiny: ModelSpec, settings_with: MakeSettings
) -> None:
    settings = settings_with(model=tiny.name)
    before = model_info(settings)
    assert before["name"] == tiny.name
    assert before["width"] == 40
    assert before["pooling"] == "mean"
    assert before["query_prefix"] == "query: "
    assert before["weights_dir"] == str(settings.dirs.weights_dir)
    assert before["complete"] is False
    assert [(f["name"], f["present"]) for f in before["files"]] == [
        ("model.onnx", False),
        ("tokenizer.json", False),
    ]
    make_tiny_model_dir(settings.dirs.weights_dir / tiny.name, 40)
    after = model_info(settings)
    assert after["complete"] is True
    assert all(f["present"] for f in after["files"])


def test_pull_downloads_even_when_downloads_are_off(
    tiny: ModelSpec, file_server: FileServer, settings_with: MakeSettings
) -> None:
    file_server.routes["/tiny/model.onnx"] = tiny_model_bytes(40)
    file_server.routes["/tiny/tokenizer.json"] = minilm_tokenizer_path().read_bytes()
    settings = settings_with(model=NO_MODEL, hub_url=file_server.url, download=False)
    model_dir = pull_model(settings, tiny.name, progress=False)
    assert model_dir == settings.dirs.weights_dir / tiny.name
    assert model_info(settings, tiny.name)["complete"] is True
    with pytest.raises(ConfigError, match="no model to pull"):
        pull_model(settings)


def test_catalog_entries() -> None:
    bge = get_spec("bge-base-en-v1.5")
    assert (bge.width, bge.pooling, bge.max_tokens) == (768, "cls", 512)
    assert bge.query_prefix == "Represent this sentence for searching relevant passages: "
    assert bge.document_prefix == ""
    assert [f.name for f in bge.files] == ["model.onnx", "tokenizer.json"]
    minilm = get_spec("minilm-l6")
    assert (minilm.width, minilm.pooling, minilm.max_tokens) == (384, "mean", 256)
    assert (minilm.query_prefix, minilm.document_prefix) == ("", "")
    for spec in (bge, minilm):
        for f in spec.files:
            assert len(f.sha256) == 64 and f.size > 0
            assert (f.url is None) != (f.package is None)


def test_bge_urls_follow_the_configured_hub(settings_with: MakeSettings) -> None:
    settings = settings_with(hub_url="http://127.0.0.1:1234/mirror/")
    bge = get_spec("bge-base-en-v1.5")
    assert file_url(bge.file("model.onnx"), settings) == (
        f"http://127.0.0.1:1234/mirror/BAAI/bge-base-en-v1.5/resolve/{BGE_REVISION}/onnx/model.onnx"
    )


def test_register_spec() -> None:
    spec = tiny_spec("tiny-registered", 8)
    register_spec(spec)
    try:
        assert get_spec("tiny-registered") is spec
    finally:
        unregister_spec("tiny-registered")
    assert "tiny-registered" not in CATALOG
    with pytest.raises(ValueError):
        register_spec(tiny_spec(NO_MODEL, 8))
