"""Tokens the memory signed: recorded, listed, revoked (GET, POST /v1/tokens, DELETE
/v1/tokens/{jti}); a revoked token is refused over REST, MCP and the console alike."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import jwt
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.auth.tokens import issue_token
from app.db.tables import tokens
from app.runtime import Runtime, open_runtime
from app.services.tokens import RevocationList
from app.settings import Settings
from app.usecases.memory import Memory
from tests.api.conftest import Auth, assert_problem
from tests.conftest import same_memory

ACTIONS = ("read", "write", "delete", "tag")


@pytest.fixture
def two_subjects(add_policy: Callable[..., None]) -> None:
    for who in ("alice", "bob"):
        add_policy(*(f"p, {who}, path:/{who}/*, {act}, allow" for act in ACTIONS))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def issue(client: TestClient, auth: Auth, issuer: str, **body: str):
    return client.post("/v1/tokens", json=body, headers=auth(issuer))


def test_an_admin_issues_a_token_that_works_and_is_recorded_never_kept(
    client: TestClient, auth: Auth, rt: Runtime, two_subjects: None
) -> None:
    made = issue(client, auth, "default", subject="alice", expires_in="2h", label="kitchen agent")
    assert made.status_code == 201, made.text
    body = made.json()
    claims = jwt.decode(body["token"], options={"verify_signature": False})
    assert claims["sub"] == "alice" and claims["jti"] == body["jti"]
    assert claims["exp"] - claims["iat"] == 7200
    assert body["subject"] == "alice" and body["label"] == "kitchen agent"
    assert body["issued_by"] == "default" and body["status"] == "active" and body["issued_here"]
    who = client.get("/v1/whoami", headers=bearer(body["token"]))
    assert who.status_code == 200 and who.json()["subject"] == "alice"
    # The record holds no token, nor any part of it that would sign a request.
    with rt.engine.connect() as conn:
        row = conn.execute(select(tokens).where(tokens.c.jti == body["jti"])).one()
    assert body["token"] not in repr(tuple(row))
    signature = body["token"].rsplit(".", 1)[1]
    assert signature not in repr(tuple(row))
    listed = client.get("/v1/tokens", headers=auth("default")).json()["tokens"]
    assert [t["jti"] for t in listed if t["subject"] == "alice"] == [body["jti"]]
    assert all("token" not in t for t in listed)


def test_a_subject_lists_and_issues_only_its_own_within_the_cap(
    client: TestClient, auth: Auth, two_subjects: None
) -> None:
    for_bob = issue(client, auth, "default", subject="bob", expires_in="1h").json()
    own = issue(client, auth, "alice", expires_in="7d", label="laptop")
    assert own.status_code == 201, own.text
    assert own.json()["subject"] == "alice" and own.json()["issued_by"] == "alice"
    mine = client.get("/v1/tokens", headers=auth("alice")).json()["tokens"]
    assert [t["jti"] for t in mine] == [own.json()["jti"]]
    assert for_bob["jti"] not in str(mine)
    refused = issue(client, auth, "alice", subject="bob")
    assert "admin role" in assert_problem(refused, 403)["detail"]
    # Without auth.max_token_lifetime a subject gives itself at most 30 days.
    too_long = assert_problem(issue(client, auth, "alice", expires_in="31d"), 422)
    assert "30 days" in too_long["detail"]
    assert too_long["errors"][0]["loc"] == ["body", "expires_in"]
    bad = assert_problem(issue(client, auth, "alice", expires_in="forever"), 422)
    assert bad["errors"][0]["loc"] == ["body", "expires_in"]
    role = assert_problem(issue(client, auth, "default", subject="everyone"), 422)
    assert "role name" in role["detail"]
    unknown = client.post("/v1/tokens", json={"scope": "x"}, headers=auth("alice"))
    assert_problem(unknown, 422)


@pytest.mark.parametrize(
    ("subject", "said"), [("a b", "contains whitespace"), ("admin", "is a role name")]
)
def test_a_subject_no_token_may_carry_is_named_as_the_field_at_fault(
    client: TestClient, auth: Auth, subject: str, said: str
) -> None:
    problem = assert_problem(issue(client, auth, "default", subject=subject), 422)
    assert said in problem["detail"]
    assert [e["loc"] for e in problem["errors"]] == [["body", "subject"]]


def test_a_name_holding_a_live_token_is_not_made_a_role_over_http(
    client: TestClient, auth: Auth
) -> None:
    erin = issue(client, auth, "default", subject="erin", expires_in="1h").json()
    line = {"line": "g, bob, erin"}
    refused = assert_problem(client.post("/v1/policies", json=line, headers=auth("default")), 422)
    assert "'erin' is a subject (it holds a token" in refused["detail"]
    assert client.get("/v1/whoami", headers=bearer(erin["token"])).status_code == 200
    assert client.delete(f"/v1/tokens/{erin['jti']}", headers=auth("default")).status_code == 204
    assert client.post("/v1/policies", json=line, headers=auth("default")).status_code == 201


def test_the_cap_is_auth_max_token_lifetime_when_set(settings: Settings) -> None:
    capped = same_memory(settings, auth={"max_token_lifetime": "2h"})
    rt = open_runtime(capped)
    try:
        memory = Memory(rt)
        memory.add_policy("default", "p, alice, path:/alice/*, read, allow")
        assert memory.issue_token("alice", "alice", dt.timedelta(hours=2)).record.subject
        with pytest.raises(Exception, match="at most 7200 seconds"):
            memory.issue_token("alice", "alice", dt.timedelta(hours=3))
    finally:
        rt.close()


def test_a_revoked_token_is_refused_on_the_next_request_over_rest_and_mcp(
    client: TestClient, auth: Auth, two_subjects: None
) -> None:
    token = issue(client, auth, "alice", expires_in="1h").json()
    other = issue(client, auth, "alice", expires_in="1h").json()
    assert client.get("/v1/whoami", headers=bearer(token["token"])).status_code == 200
    gone = client.delete(f"/v1/tokens/{token['jti']}", headers=bearer(other["token"]))
    assert gone.status_code == 204, gone.text
    refused = client.get("/v1/whoami", headers=bearer(token["token"]))
    problem = assert_problem(refused, 401)
    assert problem["detail"] == "invalid or missing bearer token"  # says no more
    assert refused.headers["www-authenticate"].startswith("Bearer")
    tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    mcp_headers = {**bearer(token["token"]), "Accept": "application/json, text/event-stream"}
    assert client.post("/mcp", json=tools, headers=mcp_headers).status_code == 401
    # The other token of the same subject still works; the list says which is which.
    assert client.get("/v1/whoami", headers=bearer(other["token"])).status_code == 200
    listed = {t["jti"]: t for t in client.get("/v1/tokens", headers=auth("alice")).json()["tokens"]}
    assert listed[token["jti"]]["status"] == "revoked"
    assert listed[token["jti"]]["revoked_by"] == "alice"
    assert listed[other["jti"]]["status"] == "active"
    again = client.delete(f"/v1/tokens/{token['jti']}", headers=auth("alice"))
    assert "already revoked" in assert_problem(again, 409)["detail"]


def test_only_the_tokens_subject_or_an_admin_revokes_it(
    client: TestClient, auth: Auth, two_subjects: None
) -> None:
    alices = issue(client, auth, "alice").json()
    # Bob is told there is no such token: he learns nothing about alice's.
    for jti in (alices["jti"], "no-such-token"):
        assert_problem(client.delete(f"/v1/tokens/{jti}", headers=auth("bob")), 404)
    assert client.get("/v1/whoami", headers=bearer(alices["token"])).status_code == 200
    assert client.delete(f"/v1/tokens/{alices['jti']}", headers=auth("default")).status_code == 204
    assert client.get("/v1/whoami", headers=bearer(alices["token"])).status_code == 401


def test_an_admin_revokes_a_jti_the_memory_never_issued(
    client: TestClient, auth: Auth, settings: Settings, two_subjects: None
) -> None:
    """An identity provider's token is not recorded; its jti, revoked by an admin, is
    refused all the same (signed here with the same key to stand in for one)."""
    outside = issue_token(settings, "bob", dt.timedelta(hours=1), jti="idp-7f3a")
    assert client.get("/v1/whoami", headers=bearer(outside)).status_code == 200
    assert client.delete("/v1/tokens/idp-7f3a", headers=auth("default")).status_code == 204
    assert client.get("/v1/whoami", headers=bearer(outside)).status_code == 401
    record = next(
        t
        for t in client.get("/v1/tokens", headers=auth("default")).json()["tokens"]
        if t["jti"] == "idp-7f3a"
    )
    assert record["issued_here"] is False and record["subject"] is None
    assert record["status"] == "revoked" and record["revoked_by"] == "default"
    # A token without a jti can be revoked by no one; a jti that is not a string is refused.
    odd = jwt.encode(
        {"sub": "bob", "exp": 2_000_000_000, "jti": 7}, _secret(settings), algorithm="HS256"
    )
    assert client.get("/v1/whoami", headers=bearer(odd)).status_code == 401


def _secret(settings: Settings) -> bytes:
    from app.auth.keys import ensure_secret

    return ensure_secret(settings)


def test_expired_tokens_are_listed_only_when_asked(
    client: TestClient, auth: Auth, rt: Runtime, two_subjects: None
) -> None:
    token = issue(client, auth, "alice", expires_in="1h").json()
    with rt.engine.begin() as conn:
        conn.execute(tokens.update().where(tokens.c.jti == token["jti"]).values(expires_at=1.0))
    assert client.get("/v1/tokens", headers=auth("alice")).json()["tokens"] == []
    listed = client.get("/v1/tokens?include_expired=true", headers=auth("alice")).json()["tokens"]
    assert [(t["jti"], t["status"]) for t in listed] == [(token["jti"], "expired")]


def test_a_server_sees_another_processes_revocation_within_its_check_interval(
    settings: Settings, rt: Runtime
) -> None:
    """Each process keeps the revoked ids and reads them again when they are older than
    auth.revocation_check_seconds (clock moved by hand, no sleep): the second runtime
    stands for another replica, or the command line."""
    memory = Memory(rt)
    token = memory.sign_token("default", dt.timedelta(hours=1))
    now = [100.0]
    rt.revocations = RevocationList(0.5, clock=lambda: now[0])
    assert memory.token_revoked(token.record.jti) is False
    other = open_runtime(same_memory(settings))
    try:
        Memory(other).revoke_token("default", token.record.jti)
    finally:
        other.close()
    now[0] += 0.4
    assert memory.token_revoked(token.record.jti) is False  # the list is 0.4 s old
    now[0] += 0.1
    assert memory.token_revoked(token.record.jti) is True


def test_a_revocation_here_is_seen_here_at_once(settings: Settings, rt: Runtime) -> None:
    memory = Memory(rt)
    token = memory.sign_token("default", dt.timedelta(hours=1))
    rt.revocations = RevocationList(3600.0, clock=lambda: 0.0)
    assert memory.token_revoked(token.record.jti) is False
    memory.revoke_token("default", token.record.jti)
    assert memory.token_revoked(token.record.jti) is True


def test_a_jwks_memory_signs_no_tokens_but_revokes_their_jti(tmp_path, settings: Settings) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path / "idp.pem"
    pem.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    idp = same_memory(settings, auth={"algorithms": ["ES256"], "public_key_file": str(pem)})
    from app.main import create_app

    token = jwt.encode(
        {"sub": "default", "exp": int(dt.datetime.now(dt.UTC).timestamp()) + 600, "jti": "j-1"},
        key,
        algorithm="ES256",
    )
    with TestClient(create_app(idp), raise_server_exceptions=False) as client:
        made = client.post("/v1/tokens", json={"subject": "default"}, headers=bearer(token))
        assert "identity provider" in assert_problem(made, 409)["detail"]
        assert client.delete("/v1/tokens/j-1", headers=bearer(token)).status_code == 204
        assert client.get("/v1/whoami", headers=bearer(token)).status_code == 401
