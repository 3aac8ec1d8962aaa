"""Over HTTP, a token that breaks the token rules is the one opaque 401, with
WWW-Authenticate, like any other bad token."""

from __future__ import annotations

import time

import jwt
from fastapi.testclient import TestClient

from app.auth.keys import ensure_secret
from app.settings import Settings
from tests.api.conftest import assert_problem


def _claims(**over) -> dict:
    now = int(time.time())
    return {"sub": "default", "iat": now, "exp": now + 600, **over}


def test_second_spellings_and_string_times_are_the_same_401(
    client: TestClient, settings: Settings
) -> None:
    secret = ensure_secret(settings)
    good = jwt.encode(_claims(), secret, algorithm="HS256")
    assert client.get("/v1/whoami", headers={"Authorization": f"Bearer {good}"}).status_code == 200
    bodies = []
    for token in (
        good + "=",
        jwt.encode(_claims(exp=str(_claims()["exp"])), secret, algorithm="HS256"),
        jwt.encode(_claims(nbf=str(int(time.time()))), secret, algorithm="HS256"),
        "not-a-token",
    ):
        response = client.get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})
        bodies.append(assert_problem(response, 401))
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert all(body == bodies[0] for body in bodies)  # nothing says which check failed
