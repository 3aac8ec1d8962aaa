"""Bearer tokens (SPEC "Auth"): verify them, issue them with the local key, read durations.

Every refusal is the same Unauthorized("invalid or missing bearer token"): a caller
learns nothing about which check failed, but one. A token that passed every check but
its expiry says so (EXPIRED_MESSAGE): its holder needs to know to get a new one, and
only the key's holder can have made it (the signature is checked before `exp`).
The reason goes to the log (debug level, or warning when the operator must act, such
as an unreachable JWKS URL); the log never holds the token.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import secrets
from collections.abc import Callable
from typing import Any

import jwt
from jwt.types import Options

from app import b64url
from app.auth.keys import ensure_secret, key_source, load_public_key, secret_origin
from app.auth.subjects import validate_subject

# Re-exported: the CLI and older callers read durations from here.
from app.durations import MAX_DURATION as MAX_DURATION
from app.durations import parse_duration as parse_duration
from app.errors import UNAUTHORIZED_MESSAGE as UNAUTHORIZED_MESSAGE
from app.errors import ConfigError, InvalidInput, TokenExpired, Unauthorized, invalid
from app.rules import MAX_JTI_CHARS
from app.settings import Settings

logger = logging.getLogger(__name__)

EXPIRED_MESSAGE = "the bearer token has expired"
# Far above any real token (an IdP token with many claims is 1-2 KiB), low enough
# that a hostile header costs nothing to refuse before any decoding.
MAX_TOKEN_CHARS = 8 * 1024
MAX_KID_CHARS = 256
# The verifier runs on the request path: an IdP that hangs must not hang requests long.
JWKS_TIMEOUT_SECONDS = 5.0
# At most one forced JWKS refresh per this many seconds, so tokens with made-up
# `kid`s cannot turn every request into a fetch from the identity provider.
JWKS_REFRESH_COOLDOWN_SECONDS = 30.0

_REGISTERED_CLAIMS = frozenset({"sub", "iat", "nbf", "exp", "iss", "aud", "jti"})


class TokenVerifier:
    """Checks bearer tokens against the configured key source; build it once at start-up.

    Construction reads (or, for HS* with no configured file, creates) the key and
    raises ConfigError when the auth settings cannot work. `verify` is blocking when
    it fetches a JWKS, so call it from a sync dependency or a worker thread.
    """

    def __init__(self, settings: Settings) -> None:
        auth = settings.auth
        self._algorithms: list[str] = list(auth.algorithms)
        # An empty string in config.yaml means "not configured", like null.
        self._issuer = auth.issuer or None
        self._audience = auth.audience or None
        self._leeway = auth.leeway_seconds
        self._max_lifetime = auth.max_token_lifetime
        require = ["exp", "sub"]
        if self._issuer:
            require.append("iss")
        if self._audience:
            require.append("aud")
        self._options: Options = {
            "verify_signature": True,
            "verify_exp": True,
            "verify_nbf": True,
            "verify_iat": True,
            "verify_iss": True,
            "verify_aud": True,
            "verify_sub": True,
            "require": require,
            # A JWKS may publish a weak key; refuse it rather than warn.
            "enforce_minimum_key_length": True,
        }
        self._key: Any = None
        self._revoked: Callable[[str], bool] | None = None
        self._jwks: jwt.PyJWKClient | None = None
        source = key_source(settings)
        if source == "secret":
            secret = ensure_secret(settings)
            self._key = _fit_key(secret, self._algorithms, secret_origin(settings))
        elif source == "public_key":
            self._key = _fit_key(
                load_public_key(settings), self._algorithms, str(auth.public_key_file)
            )
        else:
            self._jwks = _jwks_client(str(auth.jwks_url), auth.jwks_cache_seconds)

    def check_revocations(self, revoked: Callable[[str], bool]) -> None:
        """Refuse, from now on, every token whose `jti` `revoked(jti)` says is revoked
        (the memory's list: app.usecases.memory.Memory.token_revoked)."""
        self._revoked = revoked

    def verify(self, token: str | None) -> str:
        """Return the token's subject, or raise Unauthorized with the one fixed message."""
        return self._checked(token)[0]

    def verify_until(self, token: str | None) -> tuple[str, float]:
        """The token's subject and its `exp` (UNIX seconds); refused as `verify` refuses."""
        subject, claims = self._checked(token)
        return subject, float(claims["exp"])

    def _checked(self, token: str | None) -> tuple[str, dict[str, Any]]:
        claims = self._claims(token)
        jti = claims.get("jti")
        # Outside _claims' catch-all: a database fault while the list is read is the
        # server's (a 503), not a bad token's 401, which would make a client drop it.
        if jti is not None and self._revoked is not None and self._revoked(jti):
            logger.debug("bearer token refused: revoked")
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        return claims["sub"], claims

    def _claims(self, token: str | None) -> dict[str, Any]:
        try:
            return self._verify(token)
        except jwt.ExpiredSignatureError:
            if self._valid_but_expired(token):
                logger.debug("bearer token refused: expired")
                raise TokenExpired(EXPIRED_MESSAGE) from None
            logger.debug("bearer token refused: expired, and not valid otherwise")
        except _Refused as exc:
            logger.debug("bearer token refused: %s", exc)
        # %r below: PyJWT messages can quote token fields (a `kid`), which must not
        # be able to forge log lines with newlines.
        except (jwt.PyJWKClientConnectionError, jwt.PyJWKSetError) as exc:
            logger.warning("cannot use the JWKS from auth.jwks_url: %r", str(exc))
        except jwt.PyJWKClientError as exc:
            # Mostly an unknown `kid`, which anyone can send: not worth a warning.
            logger.info("bearer token refused by the JWKS lookup: %r", str(exc))
        except (jwt.PyJWTError, InvalidInput) as exc:
            logger.debug("bearer token refused: %s: %r", type(exc).__name__, str(exc))
        except Exception:
            # Fail closed: an unexpected error in a check is still a refusal.
            logger.warning("bearer token check failed unexpectedly", exc_info=True)
        raise Unauthorized(UNAUTHORIZED_MESSAGE) from None

    def _valid_but_expired(self, token: str | None) -> bool:
        """Whether an expired token passes every other check (PyJWT checks `exp` before
        `iss` and `aud`: a token for another audience must not hear it is only expired)."""
        try:
            self._verify(token, check_expiry=False)
        except Exception:
            return False
        return True

    def _verify(self, token: str | None, *, check_expiry: bool = True) -> dict[str, Any]:
        if not isinstance(token, str) or not token:
            raise _Refused("no token")
        if len(token) > MAX_TOKEN_CHARS:
            raise _Refused(f"token longer than {MAX_TOKEN_CHARS} characters")
        # Before PyJWT, which reads parts leniently: one token has one spelling, and its
        # time claims are JSON numbers (PyJWT takes "exp": "1900000000" and calls int()).
        _check_time_claims(_strict_payload(token))
        header = jwt.get_unverified_header(token)
        # PyJWT checks this too; doing it first keeps `alg: none` and foreign
        # algorithms from ever reaching a key lookup or a JWKS fetch.
        if header.get("alg") not in self._algorithms:
            raise _Refused("algorithm not in auth.algorithms")
        key = self._key
        if self._jwks is not None:
            kid = header.get("kid")
            if not isinstance(kid, str) or not kid or len(kid) > MAX_KID_CHARS:
                raise _Refused("no usable kid in the token header")
            key = self._jwks.get_signing_key(kid)
        claims = jwt.decode(
            token,
            key,
            # Pinned from config: the token header never chooses the algorithm.
            algorithms=self._algorithms,
            audience=self._audience,
            issuer=self._issuer,
            leeway=self._leeway,
            options=self._options if check_expiry else {**self._options, "verify_exp": False},
        )
        if self._max_lifetime is not None:
            _check_lifetime(claims, self._max_lifetime)
        jti = claims.get("jti")
        # RFC 7519: a case-sensitive string. Anything else could not be revoked.
        if jti is not None and (not isinstance(jti, str) or not jti or len(jti) > MAX_JTI_CHARS):
            raise _Refused(f"jti is not a string of 1 to {MAX_JTI_CHARS} characters")
        validate_subject(claims["sub"])  # present and a str: required and checked by PyJWT
        return claims


class _Refused(Exception):
    """A refusal found by our own checks (as opposed to PyJWT's)."""


_TIME_CLAIMS = ("exp", "nbf", "iat")


def _strict_payload(token: str) -> dict[str, Any]:
    """The claims of a JWS in compact form whose three parts are strict base64url.

    PyJWT pads and decodes each part with a decoder that skips unknown characters and
    ignores stray bits, so `=` appended to a signature (or a flipped last bit) gave a
    second spelling of one token: caches, logs and deny lists keyed on the token text
    would see two tokens. Unverified here; it only decides what to refuse.
    """
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise _Refused("not a JWS in compact form (three non-empty parts)")
    try:
        payload = b64url.decode(parts[1])
        b64url.decode(parts[0]), b64url.decode(parts[2])
    except ValueError as exc:
        raise _Refused(f"a token part is not strict base64url: {exc}") from None
    try:
        claims = json.loads(payload, parse_constant=_not_a_number)
    except (ValueError, RecursionError):
        raise _Refused("the payload is not JSON") from None
    if not isinstance(claims, dict):
        raise _Refused("the payload is not a JSON object")
    return claims


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_time_claims(claims: dict[str, Any]) -> None:
    """RFC 7519 NumericDate: a JSON number, not a string, a boolean or an infinity."""
    for name in _TIME_CLAIMS:
        if name in claims:
            value = claims[name]
            if type(value) not in (int, float) or not math.isfinite(value):
                raise _Refused(f"claim {name} is not a JSON number")


def _check_lifetime(claims: dict[str, Any], max_seconds: int) -> None:
    if "iat" not in claims:
        raise _Refused("no iat, and auth.max_token_lifetime needs one")
    lifetime = claims["exp"] - claims["iat"]
    if lifetime > max_seconds:
        raise _Refused(
            f"lifetime exp - iat = {lifetime:.0f}s exceeds auth.max_token_lifetime ({max_seconds}s)"
        )


def _fit_key(key: Any, algorithms: list[str], where: str) -> Any:
    """Check the key works with every pinned algorithm, so a bad key stops start-up.

    Without this a wrong key (an RSA key for ES256, a P-384 key for ES256, a short
    RSA key) would only show as every request getting 401.
    """
    prepared = key
    for name in algorithms:
        algorithm = jwt.get_algorithm_by_name(name)
        try:
            prepared = algorithm.prepare_key(key)
        except (jwt.InvalidKeyError, TypeError, ValueError):
            raise ConfigError(f"{where}: the key does not fit the algorithm {name}") from None
        weak = algorithm.check_key_length(prepared)
        if weak:
            raise ConfigError(f"{where}: the key is too weak for {name}: {weak}")
    return prepared


def _jwks_client(url: str, cache_seconds: int) -> jwt.PyJWKClient:
    try:
        return jwt.PyJWKClient(
            url,
            # Cache the key set, which expires after `lifespan`, but not single keys:
            # PyJWT's per-kid cache never expires, so a key the IdP withdrew (say,
            # after a leak) would stay trusted until restart.
            cache_keys=False,
            cache_jwk_set=cache_seconds > 0,
            lifespan=max(cache_seconds, 1),
            timeout=JWKS_TIMEOUT_SECONDS,
            cooldown_duration=JWKS_REFRESH_COOLDOWN_SECONDS,
        )
    except jwt.PyJWKClientError as exc:
        raise ConfigError(f"auth.jwks_url: {exc}") from None


def issue_token(
    settings: Settings,
    subject: str,
    expires_in: dt.timedelta,
    *,
    now: dt.datetime | None = None,
    extra_claims: dict[str, Any] | None = None,
    jti: str | None = None,
) -> str:
    """Sign a token for `subject` with the local shared secret (HS* setups only).

    Sets sub, iat, nbf, exp, jti (`jti`, or a new one), and iss/aud when configured;
    uses the first configured algorithm. A naive `now` is taken as UTC. Registered
    claims cannot be passed in `extra_claims`.
    """
    if key_source(settings) != "secret":
        raise ConfigError(
            "tokens for public-key or JWKS setups are issued by your identity provider"
        )
    validate_subject(subject)
    if expires_in <= dt.timedelta(0):
        raise invalid("expires_in", "a token's lifetime must be positive")
    cap = settings.auth.max_token_lifetime
    if cap is not None and expires_in.total_seconds() > cap:
        raise invalid(
            "expires_in",
            f"a token's lifetime is at most {cap} seconds here (auth.max_token_lifetime); "
            "the server would refuse a longer one",
        )
    extra = dict(extra_claims or {})
    clash = sorted(_REGISTERED_CLAIMS & extra.keys())
    if clash:
        raise InvalidInput(f"extra claims cannot set {', '.join(clash)}")
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)
    issued = int(now.timestamp())
    claims: dict[str, Any] = {
        **extra,
        "sub": subject,
        "iat": issued,
        "nbf": issued,
        "exp": issued + int(expires_in.total_seconds()),
        "jti": jti or new_jti(),
    }
    auth = settings.auth
    if auth.issuer:
        claims["iss"] = auth.issuer
    if auth.audience:
        claims["aud"] = auth.audience
    return jwt.encode(claims, ensure_secret(settings), algorithm=auth.algorithms[0])


def new_jti() -> str:
    """A token id no one can guess (128 random bits): knowing one revokes nothing, but a
    guessable id would let a subject probe which tokens exist. Hex digits: an id that
    began with '-' (1 in 64 of base64url's) read as an option to `embornal token revoke`."""
    return secrets.token_hex(16)
