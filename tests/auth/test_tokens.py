"""TokenVerifier and issue_token: every bad token is refused with one and the same message."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import logging
import socket
import time
from typing import Any

import jwt
import pytest
from jwt.algorithms import OKPAlgorithm

from app.auth import tokens
from app.auth.keys import SECRET_ENV, ensure_secret
from app.auth.tokens import (
    EXPIRED_MESSAGE,
    MAX_TOKEN_CHARS,
    UNAUTHORIZED_MESSAGE,
    TokenVerifier,
    issue_token,
)
from app.errors import ConfigError, InvalidInput, TokenExpired, Unauthorized

OTHER_SECRET = b"x" * 64


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def craft(header: dict[str, Any], payload: dict[str, Any], key: bytes | None) -> str:
    """Build a JWS by hand, for tokens PyJWT refuses to make (alg none, PEM as HMAC key)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    signature = (
        b"" if key is None else hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    )
    return f"{signing_input}.{b64(signature)}"


def assert_refused(verifier: TokenVerifier, token: Any) -> None:
    with pytest.raises(Unauthorized) as caught:
        verifier.verify(token)
    # The same words for every failure: nothing tells a caller which check failed.
    assert caught.value.detail == UNAUTHORIZED_MESSAGE
    assert str(caught.value) == UNAUTHORIZED_MESSAGE
    assert caught.value.status == 401
    assert caught.value.errors is None
    assert caught.value.__cause__ is None


# --- shared secret (HS256) --------------------------------------------------------------


@pytest.fixture
def hs(settings_with):
    settings = settings_with()
    return settings, ensure_secret(settings), TokenVerifier(settings)


def test_hs256_round_trip_via_issue_token(hs):
    settings, _, verifier = hs
    token = issue_token(settings, "alice", dt.timedelta(minutes=5))
    assert verifier.verify(token) == "alice"


def test_issued_token_claims(hs):
    settings, secret, _ = hs
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    token = issue_token(
        settings, "bob", dt.timedelta(hours=2), now=now, extra_claims={"scope": "cli"}
    )
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    body = jwt.decode(token, secret, algorithms=["HS256"])
    stamp = int(now.timestamp())
    jti = body.pop("jti")
    assert body == {"sub": "bob", "iat": stamp, "nbf": stamp, "exp": stamp + 7200, "scope": "cli"}
    # Every token carries an id of its own, unguessable: what revoking names.
    assert isinstance(jti, str) and len(jti) >= 20
    again = jwt.decode(
        issue_token(settings, "bob", dt.timedelta(hours=2), now=now), secret, algorithms=["HS256"]
    )
    assert again["jti"] != jti


def test_issue_token_sets_iss_and_aud_when_configured(settings_with):
    settings = settings_with(issuer="https://embornal.local", audience="embornal")
    token = issue_token(settings, "alice", dt.timedelta(minutes=5))
    body = jwt.decode(token, options={"verify_signature": False})
    assert body["iss"] == "https://embornal.local"
    assert body["aud"] == "embornal"
    assert TokenVerifier(settings).verify(token) == "alice"


def test_issue_token_uses_first_configured_algorithm(settings_with):
    settings = settings_with(algorithms=["HS512", "HS256"])
    token = issue_token(settings, "alice", dt.timedelta(minutes=5))
    assert jwt.get_unverified_header(token)["alg"] == "HS512"
    assert TokenVerifier(settings).verify(token) == "alice"


def assert_expired(verifier: TokenVerifier, token: Any) -> None:
    """The one refusal that says why: valid in every way but its time."""
    with pytest.raises(TokenExpired) as caught:
        verifier.verify(token)
    assert caught.value.detail == EXPIRED_MESSAGE


def test_issue_token_in_the_past_is_expired(hs):
    settings, _, verifier = hs
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    token = issue_token(settings, "alice", dt.timedelta(days=1), now=long_ago)
    assert_expired(verifier, token)


def test_an_expired_token_beyond_leeway_says_expired(hs, claims):
    _, secret, verifier = hs
    assert_expired(verifier, jwt.encode(claims(exp=int(time.time()) - 60), secret, "HS256"))


@pytest.mark.parametrize("subject", ["a b", "a=b", "a,b", "", "x" * 129])
def test_issue_token_refuses_bad_subject(hs, subject):
    with pytest.raises(InvalidInput, match="subject"):
        issue_token(hs[0], subject, dt.timedelta(minutes=5))


@pytest.mark.parametrize("lifetime", [dt.timedelta(0), dt.timedelta(seconds=-5)])
def test_issue_token_refuses_non_positive_lifetime(hs, lifetime):
    with pytest.raises(InvalidInput, match="positive"):
        issue_token(hs[0], "alice", lifetime)


@pytest.mark.parametrize("claim", ["sub", "exp", "iss", "aud", "nbf", "iat"])
def test_issue_token_refuses_registered_extra_claims(hs, claim):
    with pytest.raises(InvalidInput, match=claim):
        issue_token(hs[0], "alice", dt.timedelta(minutes=5), extra_claims={claim: "x"})


def test_issue_token_for_public_key_setup_is_a_config_error(
    settings_with, tmp_path, rsa_key, public_pem
):
    key_file = tmp_path / "pub.pem"
    key_file.write_bytes(public_pem(rsa_key))
    settings = settings_with(algorithms=["RS256"], public_key_file=key_file)
    with pytest.raises(ConfigError, match="identity provider"):
        issue_token(settings, "alice", dt.timedelta(minutes=5))


def test_env_secret_signs_and_verifies(settings_with, monkeypatch, tmp_path):
    monkeypatch.setenv(SECRET_ENV, "e" * 40)
    settings = settings_with()
    token = issue_token(settings, "alice", dt.timedelta(minutes=5))
    assert jwt.decode(token, b"e" * 40, algorithms=["HS256"])["sub"] == "alice"
    assert TokenVerifier(settings).verify(token) == "alice"
    # The variable replaces the key file, so none is created.
    assert not settings.secret_path.exists()


def _tampered(secret: bytes, claims) -> str:
    header, _, signature = jwt.encode(claims(), secret, algorithm="HS256").split(".")
    payload = b64(json.dumps(claims(sub="root")).encode())
    return f"{header}.{payload}.{signature}"


def _alg_none_variants(claims) -> list[str]:
    return [
        jwt.encode(claims(), None, algorithm="none"),
        craft({"alg": "none", "typ": "JWT"}, claims(), None),
        craft({"alg": "None", "typ": "JWT"}, claims(), None),
        craft({"alg": "NONE"}, claims(), None),
        craft({"typ": "JWT"}, claims(), None),  # no alg at all
    ]


HS_BAD: dict[str, Any] = {
    "none": lambda s, c: None,
    "empty": lambda s, c: "",
    "not-a-string": lambda s, c: b"abc.def.ghi",
    "garbage": lambda s, c: "not a token",
    "two-parts": lambda s, c: "abc.def",
    "bad-base64": lambda s, c: "!!!.???.***",
    "dots-only": lambda s, c: "..",
    "header-not-json": lambda s, c: f"{b64(b'nope')}.{b64(b'{}')}.{b64(b'x')}",
    "tampered-payload": lambda s, c: _tampered(s, c),
    "signature-stripped": lambda s, c: (
        jwt.encode(c(), s, algorithm="HS256").rsplit(".", 1)[0] + "."
    ),
    "wrong-key": lambda s, c: jwt.encode(c(), OTHER_SECRET, algorithm="HS256"),
    "alg-outside-list": lambda s, c: jwt.encode(c(), s, algorithm="HS384"),
    # Expired and wrong otherwise: it must not hear that it is only expired.
    "expired-and-forged": lambda s, c: jwt.encode(
        c(exp=int(time.time()) - 60), OTHER_SECRET, algorithm="HS256"
    ),
    "expired-and-for-another-audience": lambda s, c: jwt.encode(
        c(exp=int(time.time()) - 60, aud="other"), s, algorithm="HS256"
    ),
    "expired-with-a-bad-subject": lambda s, c: jwt.encode(
        c(exp=int(time.time()) - 60, sub="a b"), s, algorithm="HS256"
    ),
    "nbf-in-future": lambda s, c: jwt.encode(c(nbf=int(time.time()) + 120), s, algorithm="HS256"),
    "iat-in-future": lambda s, c: jwt.encode(c(iat=int(time.time()) + 120), s, algorithm="HS256"),
    "exp-not-a-number": lambda s, c: jwt.encode(c(exp="soon"), s, algorithm="HS256"),
    "missing-exp": lambda s, c: jwt.encode(c(exp=None), s, algorithm="HS256"),
    "missing-sub": lambda s, c: jwt.encode(c(sub=None), s, algorithm="HS256"),
    "sub-space": lambda s, c: jwt.encode(c(sub="a b"), s, algorithm="HS256"),
    "sub-equals": lambda s, c: jwt.encode(c(sub="a=b"), s, algorithm="HS256"),
    "sub-comma": lambda s, c: jwt.encode(c(sub="a,b"), s, algorithm="HS256"),
    "sub-129-chars": lambda s, c: jwt.encode(c(sub="x" * 129), s, algorithm="HS256"),
    "sub-empty": lambda s, c: jwt.encode(c(sub=""), s, algorithm="HS256"),
    "sub-not-a-string": lambda s, c: jwt.encode(c(sub=42), s, algorithm="HS256"),
    "sub-newline": lambda s, c: jwt.encode(c(sub="alice\nadmin"), s, algorithm="HS256"),
    # Signed with the right key, so only the size check stops it.
    "oversized": lambda s, c: jwt.encode(c(pad="p" * MAX_TOKEN_CHARS), s, algorithm="HS256"),
    # With no audience configured a token meant for someone else is not for us (RFC 7519 4.1.3).
    "aud-when-none-configured": lambda s, c: jwt.encode(c(aud="other"), s, algorithm="HS256"),
}


@pytest.mark.parametrize("make", HS_BAD.values(), ids=HS_BAD.keys())
def test_hs_refusals(hs, claims, make):
    _, secret, verifier = hs
    assert_refused(verifier, make(secret, claims))


@pytest.mark.parametrize("index", range(5))
def test_alg_none_refused(hs, claims, index):
    assert_refused(hs[2], _alg_none_variants(claims)[index])


def test_hs_control_token_is_accepted(hs, claims):
    # The refusals above mean something only if the same recipe with good values passes.
    _, secret, verifier = hs
    assert verifier.verify(jwt.encode(claims(), secret, algorithm="HS256")) == "alice"
    assert verifier.verify(jwt.encode(claims(sub="x" * 128), secret, algorithm="HS256")) == (
        "x" * 128
    )


def test_leeway_accepts_recently_expired_token(settings_with, claims):
    settings = settings_with(leeway_seconds=30)
    token = jwt.encode(claims(exp=int(time.time()) - 10), ensure_secret(settings), "HS256")
    assert TokenVerifier(settings).verify(token) == "alice"


def test_zero_leeway_refuses_recently_expired_token(settings_with, claims):
    settings = settings_with(leeway_seconds=0)
    token = jwt.encode(claims(exp=int(time.time()) - 10), ensure_secret(settings), "HS256")
    assert_expired(TokenVerifier(settings), token)


# --- issuer and audience ------------------------------------------------------------------


@pytest.fixture
def hs_iss_aud(settings_with):
    settings = settings_with(issuer="https://idp.example", audience="embornal")
    return ensure_secret(settings), TokenVerifier(settings)


@pytest.mark.parametrize(
    "over",
    [
        {"aud": "someone-else"},
        {"aud": ["someone-else", "another"]},
        {"aud": None},
        {"aud": ""},
        {"iss": "https://evil.example"},
        {"iss": "https://idp.example.evil"},  # no partial match
        {"iss": "https://idp"},
        {"iss": None},
    ],
    ids=lambda over: repr(over),
)
def test_issuer_and_audience_refusals(hs_iss_aud, claims, over):
    secret, verifier = hs_iss_aud
    body = claims(iss="https://idp.example", aud="embornal")
    body.update(over)
    body = {k: v for k, v in body.items() if v is not None}
    assert_refused(verifier, jwt.encode(body, secret, algorithm="HS256"))


@pytest.mark.parametrize("aud", ["embornal", ["other", "embornal"]])
def test_issuer_and_audience_accepted(hs_iss_aud, claims, aud):
    secret, verifier = hs_iss_aud
    token = jwt.encode(claims(iss="https://idp.example", aud=aud), secret, algorithm="HS256")
    assert verifier.verify(token) == "alice"


# --- public key file (RS256) ----------------------------------------------------------------


@pytest.fixture
def rs(settings_with, tmp_path, rsa_key, public_pem):
    pem = public_pem(rsa_key)
    key_file = tmp_path / "idp.pem"
    key_file.write_bytes(pem)
    settings = settings_with(algorithms=["RS256"], public_key_file=key_file)
    return pem, TokenVerifier(settings)


def test_rs256_via_public_key_file(rs, rsa_key, claims):
    _, verifier = rs
    assert verifier.verify(jwt.encode(claims(), rsa_key, algorithm="RS256")) == "alice"


def test_rs256_hmac_with_public_key_pem_is_refused(rs, claims):
    # The classic key confusion: an attacker knows the public key and signs HS256 with it.
    pem, verifier = rs
    assert_refused(verifier, craft({"alg": "HS256", "typ": "JWT"}, claims(), pem))
    # And with the key as PEM text stripped of its final newline, another common variant.
    assert_refused(verifier, craft({"alg": "HS256", "typ": "JWT"}, claims(), pem.strip()))


def test_rs256_refusals(rs, rsa_key, other_rsa_key, ed_key, claims):
    _, verifier = rs
    assert_refused(verifier, jwt.encode(claims(), other_rsa_key, algorithm="RS256"))
    assert_refused(verifier, jwt.encode(claims(), rsa_key, algorithm="RS512"))
    assert_refused(verifier, jwt.encode(claims(), rsa_key, algorithm="PS256"))
    assert_refused(verifier, jwt.encode(claims(), ed_key, algorithm="EdDSA"))
    assert_refused(verifier, jwt.encode(claims(exp=None), rsa_key, algorithm="RS256"))
    assert_refused(verifier, jwt.encode(claims(), None, algorithm="none"))


# --- JWKS (EdDSA) -------------------------------------------------------------------------


def jwk(key, kid: str) -> dict[str, Any]:
    data = OKPAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**data, "kid": kid, "alg": "EdDSA", "use": "sig"}


@pytest.fixture
def jwks(settings_with, jwks_server, ed_key):
    jwks_server.keys = [jwk(ed_key, "k1")]
    settings = settings_with(algorithms=["EdDSA"], jwks_url=jwks_server.url)
    return jwks_server, settings


def test_eddsa_via_jwks_with_right_kid(jwks, ed_key, claims):
    server, settings = jwks
    verifier = TokenVerifier(settings)
    token = jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": "k1"})
    assert verifier.verify(token) == "alice"
    assert verifier.verify(token) == "alice"
    assert server.requests == 1  # the key set is cached


def test_jwks_unknown_kid_is_refused(jwks, ed_key, claims):
    _, settings = jwks
    verifier = TokenVerifier(settings)
    assert_refused(verifier, jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": "k9"}))


@pytest.mark.parametrize("kid", [None, "", 7, "k" * 300])
def test_jwks_missing_or_odd_kid_is_refused_without_fetching(jwks, ed_key, claims, kid):
    server, settings = jwks
    verifier = TokenVerifier(settings)
    header = {"alg": "EdDSA", "typ": "JWT"} if kid is None else {"alg": "EdDSA", "kid": kid}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims()).encode())}"
    token = f"{signing_input}.{b64(ed_key.sign(signing_input.encode()))}"
    assert_refused(verifier, token)
    assert server.requests == 0


def test_jwks_right_kid_wrong_key_is_refused(jwks, claims):
    from cryptography.hazmat.primitives.asymmetric import ed25519

    _, settings = jwks
    stranger = ed25519.Ed25519PrivateKey.generate()
    token = jwt.encode(claims(), stranger, algorithm="EdDSA", headers={"kid": "k1"})
    assert_refused(TokenVerifier(settings), token)


def test_jwks_alg_none_never_fetches(jwks, claims):
    server, settings = jwks
    verifier = TokenVerifier(settings)
    assert_refused(verifier, craft({"alg": "none", "kid": "k1"}, claims(), None))
    assert_refused(verifier, craft({"alg": "HS256", "kid": "k1"}, claims(), b"k" * 32))
    assert server.requests == 0


def test_jwks_unknown_kid_refresh_is_rate_limited(jwks, ed_key, claims):
    server, settings = jwks
    verifier = TokenVerifier(settings)
    verifier.verify(jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": "k1"}))
    for kid in ("x1", "x2", "x3"):
        assert_refused(
            verifier, jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": kid})
        )
    assert server.requests == 1


def test_jwks_refreshes_on_unknown_kid_for_rotation(jwks, ed_key, claims, monkeypatch):
    from cryptography.hazmat.primitives.asymmetric import ed25519

    monkeypatch.setattr(tokens, "JWKS_REFRESH_COOLDOWN_SECONDS", 0.0)
    server, settings = jwks
    verifier = TokenVerifier(settings)
    assert verifier.verify(jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": "k1"}))
    rotated = ed25519.Ed25519PrivateKey.generate()
    server.keys = [jwk(rotated, "k2")]
    token = jwt.encode(claims(sub="bob"), rotated, algorithm="EdDSA", headers={"kid": "k2"})
    assert verifier.verify(token) == "bob"
    assert server.requests == 2


def test_jwks_fetch_error_is_refused_and_logged(jwks, ed_key, claims, caplog):
    server, settings = jwks
    server.status = 500
    verifier = TokenVerifier(settings)
    token = jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": "k1"})
    with caplog.at_level(logging.WARNING, logger="app.auth.tokens"):
        assert_refused(verifier, token)
    assert "JWKS" in caplog.text
    assert token not in caplog.text


def test_jwks_unreachable_is_refused(settings_with, ed_key, claims):
    # A port nobody listens on: connection refused on loopback, no waiting.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = settings_with(algorithms=["EdDSA"], jwks_url=f"http://127.0.0.1:{port}/jwks")
    token = jwt.encode(claims(), ed_key, algorithm="EdDSA", headers={"kid": "k1"})
    assert_refused(TokenVerifier(settings), token)


def test_jwks_url_must_be_http(settings_with):
    settings = settings_with(algorithms=["EdDSA"], jwks_url="file:///etc/passwd")
    with pytest.raises(ConfigError, match="jwks_url"):
        TokenVerifier(settings)


# --- logging ------------------------------------------------------------------------------


def test_refusal_reason_is_logged_but_never_the_token(hs, claims, caplog):
    _, secret, verifier = hs
    token = jwt.encode(claims(exp=int(time.time()) - 600, aud="x"), secret, algorithm="HS256")
    with caplog.at_level(logging.DEBUG, logger="app.auth.tokens"):
        assert_refused(verifier, token)
    assert "expired" in caplog.text.lower()
    assert token not in caplog.text
    assert secret.decode() not in caplog.text
