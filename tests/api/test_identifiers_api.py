"""Over HTTP: identifiers with control or format characters are refused, and nothing
is written; a token for a lookalike or non-NFC subject is a 401."""

from __future__ import annotations

import datetime as dt

import jwt
import pytest
from fastapi.testclient import TestClient

from app.auth.keys import ensure_secret
from app.settings import Settings
from tests.api.conftest import Auth, assert_problem

ZWSP, RLO, BOM, NUL = "\u200b", "\u202e", "\ufeff", "\x00"


def _token(settings: Settings, subject: str) -> dict[str, str]:
    """Signed with the local key, past issue_token's own check of the subject."""
    now = int(dt.datetime.now(dt.UTC).timestamp())
    claims = {"sub": subject, "iat": now, "exp": now + 600}
    token = jwt.encode(claims, ensure_secret(settings), algorithm="HS256")
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "body",
    [
        {"path": f"/notes{ZWSP}", "content": "x"},
        {"path": "/notes\n", "content": "x"},
        {"path": "/notes", "content": "x", "tags": {"team": f"green{RLO}"}},
        {"path": "/notes", "content": "x", "tags": {f"{BOM}team": "green"}},
        {"path": "/notes", "content": "x", "tags": {"team": f"gr{NUL}een"}},
    ],
)
def test_a_store_with_a_hidden_character_is_422_and_writes_nothing(
    client: TestClient, auth: Auth, fact_count, body: dict
) -> None:
    before = fact_count()
    problem = assert_problem(client.post("/v1/facts", json=body, headers=auth("default")), 422)
    assert "control or format character" in problem["detail"]
    assert problem["errors"][0]["loc"][:2] in (["body", "path"], ["body", "tags"])
    assert fact_count() == before


def test_path_tags_filters_and_paths_refuse_them(client: TestClient, auth: Auth) -> None:
    headers = auth("default")
    put = client.put("/v1/paths/team/tags", json={"visibility": f"public{ZWSP}"}, headers=headers)
    assert_problem(put, 422)
    listing = client.get("/v1/facts", params={"tag": f"visibility=public{ZWSP}"}, headers=headers)
    assert_problem(listing, 422)
    assert_problem(client.get("/v1/facts", params={"under": f"/memory{RLO}"}, headers=headers), 422)


@pytest.mark.parametrize("subject", [f"default{ZWSP}", f"{BOM}default", "jose\u0301"])
def test_a_token_for_a_lookalike_or_non_nfc_subject_is_401(
    client: TestClient, settings: Settings, subject: str
) -> None:
    response = client.get("/v1/whoami", headers=_token(settings, subject))
    assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    # The same key and a plain subject: the refusal is the name, not the token.
    assert client.get("/v1/whoami", headers=_token(settings, "jos\u00e9")).status_code == 200


def test_a_policy_line_with_a_lookalike_subject_is_422(client: TestClient, auth: Auth) -> None:
    for line in (f"p, alice{ZWSP}, path:/a/*, read, allow", f"g, default{ZWSP}, admin"):
        response = client.post("/v1/policies", json={"line": line}, headers=auth("default"))
        assert "control or format character" in assert_problem(response, 422)["detail"]
