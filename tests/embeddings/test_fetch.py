"""Fetching model files from a loopback HTTP server: success, resume, integrity, errors."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from app.embeddings import fetch
from app.embeddings.base import ModelUnavailable
from app.embeddings.catalog import ModelSpec
from app.embeddings.fetch import SIDECAR, ensure_model_files, model_status
from tests.embeddings._support import FileServer, MakeSettings, Redirect
from tests.onnx_factory import minilm_tokenizer_path, tiny_model_bytes, tiny_spec

WIDTH = 32


@pytest.fixture
def spec() -> ModelSpec:
    return tiny_spec("tiny-dl", WIDTH)


@pytest.fixture
def blobs() -> dict[str, bytes]:
    return {
        "model.onnx": tiny_model_bytes(WIDTH),
        "tokenizer.json": minilm_tokenizer_path().read_bytes(),
    }


@pytest.fixture
def served(file_server: FileServer, blobs: dict[str, bytes]) -> FileServer:
    for name, data in blobs.items():
        file_server.routes[f"/tiny/{name}"] = data
    return file_server


def _leftovers(model_dir: Path) -> list[str]:
    return sorted(p.name for p in model_dir.iterdir() if p.name.endswith(".part"))


def test_downloads_verifies_and_renames(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = ensure_model_files(spec, settings, progress=False)
    assert model_dir == settings.dirs.weights_dir / "tiny-dl"
    for name, data in blobs.items():
        assert (model_dir / name).read_bytes() == data
    assert _leftovers(model_dir) == []
    assert (model_dir / SIDECAR).is_file()
    assert [path for path, _ in served.requests] == ["/tiny/model.onnx", "/tiny/tokenizer.json"]
    status = model_status(spec, settings)
    assert status["complete"] is True
    assert all(f["present"] and f["verified"] for f in status["files"])


def test_follows_redirects_like_the_hub_does(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    served.routes["/cdn/blob"] = served.routes["/tiny/model.onnx"]
    served.routes["/tiny/model.onnx"] = Redirect("/cdn/blob")
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = ensure_model_files(spec, settings, progress=False)
    assert (model_dir / "model.onnx").read_bytes() == blobs["model.onnx"]


def test_resumes_a_part_left_by_an_interrupted_run(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = settings.dirs.weights_dir / spec.name
    model_dir.mkdir(parents=True)
    half = len(blobs["model.onnx"]) // 2
    (model_dir / "model.onnx.part").write_bytes(blobs["model.onnx"][:half])
    ensure_model_files(spec, settings, progress=False)
    assert (model_dir / "model.onnx").read_bytes() == blobs["model.onnx"]
    assert ("/tiny/model.onnx", f"bytes={half}-") in served.requests
    assert _leftovers(model_dir) == []


def test_resume_when_the_server_ignores_ranges(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    served.honor_range = False
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = settings.dirs.weights_dir / spec.name
    model_dir.mkdir(parents=True)
    (model_dir / "model.onnx.part").write_bytes(blobs["model.onnx"][:1000])
    ensure_model_files(spec, settings, progress=False)
    assert (model_dir / "model.onnx").read_bytes() == blobs["model.onnx"]


def test_a_stale_part_is_dropped_and_fetched_again(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = settings.dirs.weights_dir / spec.name
    model_dir.mkdir(parents=True)
    (model_dir / "model.onnx.part").write_bytes(b"x" * 100)  # from some other version
    ensure_model_files(spec, settings, progress=False)
    assert (model_dir / "model.onnx").read_bytes() == blobs["model.onnx"]
    model_requests = [r for r in served.requests if r[0] == "/tiny/model.onnx"]
    assert model_requests == [("/tiny/model.onnx", "bytes=100-"), ("/tiny/model.onnx", None)]


def test_sha256_mismatch_raises_and_leaves_nothing(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    tampered = bytearray(blobs["model.onnx"])
    tampered[-1] ^= 0xFF
    served.routes["/tiny/model.onnx"] = bytes(tampered)
    settings = settings_with(hub_url=served.url, download=True)
    with pytest.raises(ModelUnavailable) as caught:
        ensure_model_files(spec, settings, progress=False)
    reason = caught.value.reason
    assert "model.onnx" in reason
    assert spec.file("model.onnx").sha256 in reason
    assert hashlib.sha256(tampered).hexdigest() in reason
    model_dir = settings.dirs.weights_dir / spec.name
    assert not (model_dir / "model.onnx").exists()
    assert _leftovers(model_dir) == []


def test_a_longer_body_than_pinned_is_rejected(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    served.routes["/tiny/tokenizer.json"] = blobs["tokenizer.json"] + b"trailing junk"
    settings = settings_with(hub_url=served.url, download=True)
    with pytest.raises(ModelUnavailable, match=r"tokenizer\.json.*integrity"):
        ensure_model_files(spec, settings, progress=False)
    model_dir = settings.dirs.weights_dir / spec.name
    assert not (model_dir / "tokenizer.json").exists()
    assert _leftovers(model_dir) == []


def test_http_404_is_a_clear_reason(
    file_server: FileServer, spec: ModelSpec, settings_with: MakeSettings
) -> None:
    settings = settings_with(hub_url=file_server.url, download=True)
    with pytest.raises(ModelUnavailable) as caught:
        ensure_model_files(spec, settings, progress=False)
    reason = caught.value.reason
    assert "HTTP 404" in reason
    assert f"{file_server.url}/tiny/model.onnx" in reason
    assert not (settings.dirs.weights_dir / spec.name / "model.onnx").exists()


def test_unreachable_host_is_a_clear_reason(spec: ModelSpec, settings_with: MakeSettings) -> None:
    settings = settings_with(download=True)  # hub_url: the closed discard port on loopback
    with pytest.raises(
        ModelUnavailable, match=re.escape("cannot download model.onnx from http://127.0.0.1:9/")
    ):
        ensure_model_files(spec, settings, progress=False)


def test_downloads_off_means_no_request_and_a_hint(
    served: FileServer, spec: ModelSpec, settings_with: MakeSettings
) -> None:
    settings = settings_with(hub_url=served.url, download=False)
    with pytest.raises(ModelUnavailable, match=r"model files missing.*run `embornal model pull`"):
        ensure_model_files(spec, settings, progress=False)
    assert served.requests == []
    # An explicit pull overrides the setting.
    ensure_model_files(spec, settings, progress=False, download=True)
    assert model_status(spec, settings)["complete"] is True


def test_verified_files_are_not_rehashed_or_fetched_again(
    served: FileServer,
    spec: ModelSpec,
    settings_with: MakeSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    ensure_model_files(spec, settings, progress=False)
    requests = len(served.requests)
    hashed: list[Path] = []
    real = fetch.sha256_file

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(fetch, "sha256_file", counting)
    ensure_model_files(spec, settings, progress=False)
    assert hashed == []
    assert len(served.requests) == requests


def test_a_changed_file_is_rehashed_and_replaced(
    served: FileServer, spec: ModelSpec, blobs: dict[str, bytes], settings_with: MakeSettings
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = ensure_model_files(spec, settings, progress=False)
    target = model_dir / "model.onnx"
    corrupted = bytearray(target.read_bytes())
    corrupted[10] ^= 0xFF
    target.write_bytes(bytes(corrupted))  # same size, new content
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    ensure_model_files(spec, settings, progress=False)
    assert target.read_bytes() == blobs["model.onnx"]


@pytest.fixture
def read_only(tmp_path: Path):
    """Bind-mount a directory read-only over itself (root only), as a container with
    `read_only: true` sees its image's files; unmounted afterwards."""
    import subprocess

    mounted: list[Path] = []

    def make(directory: Path) -> None:
        for command in (
            ["mount", "--bind", str(directory), str(directory)],
            ["mount", "-o", "remount,ro,bind", str(directory)],
        ):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                if mounted:
                    subprocess.run(["umount", str(directory)], check=False)
                pytest.skip(f"cannot bind-mount read-only here: {done.stderr.strip()}")
            if command[1] == "--bind":
                mounted.append(directory)

    yield make
    for directory in mounted:
        subprocess.run(["umount", str(directory)], check=True)


def test_verified_weights_load_from_a_read_only_directory(
    served: FileServer,
    spec: ModelSpec,
    blobs: dict[str, bytes],
    settings_with: MakeSettings,
    read_only,
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = ensure_model_files(spec, settings, progress=False)
    # A copy that lost the mtimes the sidecar knows (as an image layer may): hashed again.
    for name in blobs:
        st = (model_dir / name).stat()
        os.utime(model_dir / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    read_only(model_dir)
    with pytest.raises(OSError):
        (model_dir / "probe").write_bytes(b"")  # the mount holds
    requests = len(served.requests)
    assert ensure_model_files(spec, settings, progress=False) == model_dir
    assert len(served.requests) == requests  # verified in place, nothing fetched


def test_progress_bar_goes_to_stderr(
    served: FileServer,
    spec: ModelSpec,
    settings_with: MakeSettings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = settings_with(hub_url=served.url, download=True)
    ensure_model_files(spec, settings, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "model.onnx" in err


def test_status_of_a_missing_model(spec: ModelSpec, settings_with: MakeSettings) -> None:
    status = model_status(spec, settings_with())
    assert status["complete"] is False
    assert [f["present"] for f in status["files"]] == [False, False]
    assert status["files"][0]["source"] == "http://127.0.0.1:9/tiny/model.onnx"


def test_a_lock_free_check_recording_meanwhile_does_not_break_the_locked_fetchers_record(
    served: FileServer,
    spec: ModelSpec,
    settings_with: MakeSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fetcher holding the model dir's lock records a hash while another process's
    lock-free check (a server starting) records the hashes it made: the check runs
    between the locked fetcher's writing of its temporary file and its rename. With one
    temporary name for both, the check renamed the locked fetcher's file away and its
    rename failed (FileNotFoundError: the pull or the start failed)."""
    settings = settings_with(hub_url=served.url, download=True)
    model_dir = ensure_model_files(spec, settings, progress=False)
    for name in ("model.onnx", "tokenizer.json"):  # copies the sidecar no longer knows
        st = (model_dir / name).stat()
        os.utime(model_dir / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    real = os.replace
    checks: list[bool] = []

    def the_check_first(src, dst) -> None:
        monkeypatch.setattr(os, "replace", real)
        other = fetch._Fetcher(spec, settings, download=False, progress=False)
        checks.append(other._all_verified_without_writing())
        real(src, dst)

    locked = fetch._VerifiedCache(model_dir)
    target = model_dir / "model.onnx"
    with fetch._locked(model_dir):
        sha = fetch.sha256_file(target)
        monkeypatch.setattr(os, "replace", the_check_first)
        locked.record(target, sha)
    assert checks == [True]
    assert fetch._VerifiedCache(model_dir).knows(target, sha)
    assert sorted(p.name for p in model_dir.iterdir() if p.name.startswith(".")) == [
        ".lock",
        SIDECAR,
    ]
