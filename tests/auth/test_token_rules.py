"""Token rules beyond a valid signature (SPEC "Auth"): time claims are JSON numbers,
parts are strict base64url (one token, one spelling), and an optional lifetime cap."""

from __future__ import annotations

import datetime as dt
import logging
import time

import jwt
import pytest

from app.auth.keys import ensure_secret
from app.auth.tokens import TokenVerifier, issue_token
from app.errors import ConfigError, InvalidInput
from app.settings import load_settings
from tests.auth.test_tokens import assert_refused, b64, craft

HS = {"alg": "HS256", "typ": "JWT"}


@pytest.fixture
def hs(make_settings):
    settings = make_settings()
    return settings, ensure_secret(settings), TokenVerifier(settings)


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_time_claims_given_as_strings_are_refused(hs, claims, claim, caplog):
    _, secret, verifier = hs
    good = claims()
    assert verifier.verify(craft(HS, good, secret)) == "alice"  # the control
    with caplog.at_level(logging.DEBUG, logger="app.auth.tokens"):
        assert_refused(verifier, craft(HS, {**good, claim: str(good[claim])}, secret))
    assert f"claim {claim} is not a JSON number" in caplog.text


@pytest.mark.parametrize("value", [True, None, [1], {"t": 1}, "Infinity", 1e400])
def test_exp_of_any_other_json_kind_is_refused(hs, claims, value):
    _, secret, verifier = hs
    assert_refused(verifier, craft(HS, {**claims(), "exp": value}, secret))


def test_nan_and_infinity_literals_are_not_json(hs, claims):
    """Python's json reads `NaN` and `Infinity`; they are not JSON and not times."""
    _, secret, verifier = hs
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = f'{{"sub": "alice", "exp": {literal}}}'.encode()
        token = jwt.api_jws.PyJWS().encode(body, secret, algorithm="HS256")
        assert token.split(".")[1] == b64(body)  # signed as written
        assert_refused(verifier, token)


def test_float_time_claims_are_numbers_and_accepted(hs, claims):
    _, secret, verifier = hs
    now = time.time()
    assert verifier.verify(craft(HS, claims(iat=now, nbf=now, exp=now + 60.5), secret)) == "alice"


def test_rs256_signature_with_padding_is_refused(
    make_settings, tmp_path, rsa_key, public_pem, claims
):
    key_file = tmp_path / "idp.pem"
    key_file.write_bytes(public_pem(rsa_key))
    verifier = TokenVerifier(make_settings(algorithms=["RS256"], public_key_file=key_file))
    token = jwt.encode(claims(), rsa_key, algorithm="RS256")
    assert verifier.verify(token) == "alice"
    # A 256-byte RSA signature is 342 base64url characters: 2 short of a block of 4.
    assert len(token.split(".")[2]) % 4 == 2
    for spelling in (token + "=", token + "==", token + "%3D", token + "\n"):
        assert_refused(verifier, spelling)


def test_other_second_spellings_are_refused(hs, claims, caplog):
    _, secret, verifier = hs
    token = craft(HS, claims(), secret)
    header, payload, signature = token.split(".")
    # The last character of a 43-character HS256 signature carries 2 unused bits.
    last = signature[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    stray = alphabet[alphabet.index(last) ^ 1]
    spellings = [
        f"{header}.{payload}.{signature[:-1]}{stray}",  # same bytes, other trailing bits
        f"{header}=.{payload}.{signature}",
        f"{header}.{payload}=.{signature}",
        f"{header}.{payload}.{signature.replace('-', '+').replace('_', '/')}",
        f"{header}.{payload}.{signature}.",
        f"{header}.{payload}.{signature[:10]}*{signature[10:]}",
    ]
    with caplog.at_level(logging.DEBUG, logger="app.auth.tokens"):
        for spelling in spellings:
            if spelling != token:
                assert_refused(verifier, spelling)
    assert "not strict base64url" in caplog.text


# --- auth.max_token_lifetime ----------------------------------------------------------------


def test_lifetime_cap_is_off_by_default(hs, claims):
    _, secret, verifier = hs
    now = int(time.time())
    assert verifier.verify(craft(HS, claims(iat=now, exp=now + 10 * 365 * 86400), secret))
    assert verifier.verify(craft(HS, claims(iat=None), secret)) == "alice"


def test_lifetime_cap_refuses_longer_tokens_and_tokens_without_iat(make_settings, claims, caplog):
    settings = make_settings(max_token_lifetime="1h")
    assert settings.auth.max_token_lifetime == 3600
    secret, verifier = ensure_secret(settings), TokenVerifier(settings)
    now = int(time.time())
    assert verifier.verify(craft(HS, claims(iat=now, exp=now + 3600), secret)) == "alice"
    with caplog.at_level(logging.DEBUG, logger="app.auth.tokens"):
        assert_refused(verifier, craft(HS, claims(iat=now, exp=now + 3601), secret))
        assert "exceeds auth.max_token_lifetime" in caplog.text
        assert_refused(verifier, craft(HS, claims(iat=None), secret))
        assert "no iat" in caplog.text
    # iat moved back to look recent-but-old does not help: exp - iat is what counts.
    assert_refused(verifier, craft(HS, claims(iat=now - 7200, exp=now + 60), secret))


def test_token_issue_refuses_a_lifetime_the_server_would_refuse(make_settings):
    settings = make_settings(max_token_lifetime=86400)
    assert issue_token(settings, "alice", dt.timedelta(days=1))
    with pytest.raises(InvalidInput, match="max_token_lifetime"):
        issue_token(settings, "alice", dt.timedelta(days=30))


@pytest.mark.parametrize(
    ("raw", "seconds"), [("3600", 3600), ("30d", 30 * 86400), ("1d12h", 129600), ("", None)]
)
def test_max_token_lifetime_reads_seconds_or_durations_from_env(tmp_path, raw, seconds):
    from app.dirs import Dirs

    env = {"EMBORNAL_AUTH__MAX_TOKEN_LIFETIME": raw}
    settings = load_settings(Dirs(tmp_path, tmp_path, tmp_path), env=env)
    assert settings.auth.max_token_lifetime == seconds


@pytest.mark.parametrize("raw", ["0", "-5", "forever", "30x", "true", "9999w"])
def test_bad_max_token_lifetime_names_the_key(tmp_path, raw):
    from app.dirs import Dirs

    env = {"EMBORNAL_AUTH__MAX_TOKEN_LIFETIME": raw}
    with pytest.raises(ConfigError) as caught:
        load_settings(Dirs(tmp_path, tmp_path, tmp_path), env=env)
    assert "EMBORNAL_AUTH__MAX_TOKEN_LIFETIME" in caught.value.detail
    assert "auth.max_token_lifetime" in caught.value.detail
