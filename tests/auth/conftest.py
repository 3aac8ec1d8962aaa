"""Shared helpers for the auth tests: settings on tmp_path, keys, a loopback JWKS server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from app.auth.keys import SECRET_ENV
from app.settings import Settings
from tests.conftest import make_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A secret in the developer's environment would override every test's key file.
    monkeypatch.delenv(SECRET_ENV, raising=False)
    # urllib (inside PyJWKClient) honours proxy variables; loopback must stay direct.
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


MakeSettings = Callable[..., Settings]


@pytest.fixture
def settings_with(tmp_path: Path) -> MakeSettings:
    """Settings in tmp_path with these `auth` keys (tests.conftest.make_settings)."""

    def make(**auth: Any) -> Settings:
        return make_settings(tmp_path, auth=auth)

    return make


def _claims(**over: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {"sub": "alice", "iat": now, "nbf": now, "exp": now + 300}
    base.update(over)
    return {k: v for k, v in base.items() if v is not None}


@pytest.fixture
def claims() -> Callable[..., dict[str, Any]]:
    """A valid claim set for `alice`; keyword arguments replace claims (None drops one)."""
    return _claims


@pytest.fixture(scope="session")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def other_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def ed_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


@pytest.fixture
def public_pem() -> Callable[[rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey], bytes]:
    """PEM (SubjectPublicKeyInfo) bytes of a private key's public half."""

    def pem(key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
        return key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    return pem


@dataclass
class JwksServer:
    url: str
    keys: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    requests: int = 0


@pytest.fixture
def jwks_server() -> Iterator[JwksServer]:
    """Serve `state.keys` as a JWKS on 127.0.0.1 (ephemeral port), counting requests."""
    state = JwksServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests += 1
            body = json.dumps({"keys": state.keys}).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval: shutdown() waits for the loop to notice, 0.5 s by default.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
