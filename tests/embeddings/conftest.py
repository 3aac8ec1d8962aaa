"""Fixtures for the embeddings tests: settings in tmp_path, a loopback file server, no network."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.settings import EmbeddingSettings, Settings
from tests.conftest import make_settings
from tests.embeddings._support import NOWHERE, FileServer, MakeSettings, serve


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
def settings_with(tmp_path: Path) -> MakeSettings:
    """Settings whose three dirs are tmp_path, for the catalog's default model unless
    told; downloads off and every URL on loopback (tests.conftest.make_settings)."""
    default = EmbeddingSettings()

    def make(**embedding: Any) -> Settings:
        values: dict[str, Any] = {
            "model": default.model,
            "width": default.width,
            "hub_url": NOWHERE,
            "pypi_url": NOWHERE,
            "download": False,
        }
        return make_settings(tmp_path, embedding=values | embedding)

    return make


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    """A loopback file server, stopped after the test."""
    with serve() as server:
        yield server
