"""Fixtures for the embeddings tests: settings in tmp_path, a loopback file server, no network."""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# `tests.onnx_factory` is imported by module path; make the repo root importable
# whatever pytest's rootdir/pythonpath settings are.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from app.dirs import Dirs  # noqa: E402
from app.settings import EmbeddingSettings, Settings  # noqa: E402
from tests.embeddings._support import NOWHERE, FileServer, MakeSettings, serve  # noqa: E402


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX and friends
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that tries to reach a host other than loopback."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            raise AssertionError(f"test tried to reach {address!r}: only loopback is allowed")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_settings(tmp_path: Path) -> MakeSettings:
    """Settings whose three dirs are tmp_path; downloads off and URLs on loopback by default."""

    def make(**embedding: Any) -> Settings:
        values: dict[str, Any] = {"hub_url": NOWHERE, "pypi_url": NOWHERE, "download": False}
        values.update(embedding)
        return Settings(
            dirs=Dirs(tmp_path, tmp_path, tmp_path), embedding=EmbeddingSettings(**values)
        )

    return make


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    """A loopback file server, stopped after the test."""
    with serve() as server:
        yield server
