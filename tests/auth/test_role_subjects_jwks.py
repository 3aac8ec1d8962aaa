"""A token from an identity provider (JWKS) whose `sub` is a role name is refused
over HTTP, like any bad token; the same provider's other subjects get through."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ed25519
from fastapi.testclient import TestClient
from jwt.algorithms import OKPAlgorithm

from app.main import create_app
from app.services import policies as policy_service
from app.usecases.memory import Memory
from tests.conftest import make_settings


def test_a_jwks_token_whose_sub_is_a_role_gets_no_rights(
    tmp_path: Path, migrated_template: Path, jwks_server: Any, ed_key: ed25519.Ed25519PrivateKey
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(migrated_template, home / "memory.db")
    jwks_server.keys = [
        {**OKPAlgorithm.to_jwk(ed_key.public_key(), as_dict=True), "kid": "k1", "alg": "EdDSA"}
    ]
    settings = make_settings(home, auth={"algorithms": ["EdDSA"], "jwks_url": jwks_server.url})

    def bearer(sub: str) -> dict[str, str]:
        now = int(time.time())
        claims = {"sub": sub, "iat": now, "exp": now + 300}
        token = jwt.encode(claims, ed_key, algorithm="EdDSA", headers={"kid": "k1"})
        return {"Authorization": f"Bearer {token}"}

    app = create_app(settings)
    with TestClient(app, raise_server_exceptions=False) as client:
        me = client.get("/v1/whoami", headers=bearer("alice"))
        assert me.status_code == 200 and me.json()["roles"] == ["everyone"]
        assert client.get("/v1/whoami", headers=bearer("reader")).status_code == 200
        # The owner makes `reader` a role (as `embornal policy add` does).
        with Memory(app.state.runtime).transaction("default", write=True) as (conn, ctx):
            policy_service.add_policy(conn, ctx, "g, alice, reader")
        me = client.get("/v1/whoami", headers=bearer("alice"))
        assert me.json()["roles"] == ["everyone", "reader"]
        for role in ("admin", "everyone", "reader"):
            for response in (
                client.get("/v1/whoami", headers=bearer(role)),
                client.get("/v1/policies", headers=bearer(role)),
                client.post(
                    "/v1/policies", json={"line": f"g, {role}x, admin"}, headers=bearer(role)
                ),
            ):
                assert response.status_code == 401, response.text
                assert response.headers["www-authenticate"] == "Bearer"
                assert response.json()["detail"] == "invalid or missing bearer token"
