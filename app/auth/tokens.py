"""Bearer tokens (SPEC "Auth"): verify them, issue them with the local key, read durations.

Every refusal is the same Unauthorized("invalid or missing bearer token"): a caller
learns nothing about which check failed. The reason goes to the log (debug level,
or warning when the operator must act, such as an unreachable JWKS URL); the log
never holds the token.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any

import jwt
from jwt.types import Options

from app.auth.keys import ensure_secret, key_source, load_public_key, secret_origin
from app.auth.subjects import validate_subject
from app.errors import ConfigError, InvalidInput, Unauthorized
from app.settings import Settings

logger = logging.getLogger(__name__)

UNAUTHORIZED_MESSAGE = "invalid or missing bearer token"
# Far above any real token (an IdP token with many claims is 1-2 KiB), low enough
# that a hostile header costs nothing to refuse before any decoding.
MAX_TOKEN_CHARS = 8 * 1024
MAX_KID_CHARS = 256
# The verifier runs on the request path: an IdP that hangs must not hang requests long.
JWKS_TIMEOUT_SECONDS = 5.0
# At most one forced JWKS refresh per this many seconds, so tokens with made-up
# `kid`s cannot turn every request into a fetch from the identity provider.
JWKS_REFRESH_COOLDOWN_SECONDS = 30.0

_REGISTERED_CLAIMS = frozenset({"sub", "iat", "nbf", "exp", "iss", "aud"})


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

    def verify(self, token: str | None) -> str:
        """Return the token's subject, or raise Unauthorized with the one fixed message."""
        try:
            return self._verify(token)
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

    def _verify(self, token: str | None) -> str:
        if not isinstance(token, str) or not token:
            raise _Refused("no token")
        if len(token) > MAX_TOKEN_CHARS:
            raise _Refused(f"token longer than {MAX_TOKEN_CHARS} characters")
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
            options=self._options,
        )
        subject = claims["sub"]  # present and a str: required and checked by PyJWT
        return validate_subject(subject)


class _Refused(Exception):
    """A refusal found by our own checks (as opposed to PyJWT's)."""


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
) -> str:
    """Sign a token for `subject` with the local shared secret (HS* setups only).

    Sets sub, iat, nbf, exp, and iss/aud when configured; uses the first configured
    algorithm. A naive `now` is taken as UTC. Registered claims cannot be passed
    in `extra_claims`.
    """
    if key_source(settings) != "secret":
        raise ConfigError(
            "tokens for public-key or JWKS setups are issued by your identity provider"
        )
    validate_subject(subject)
    if expires_in <= dt.timedelta(0):
        raise InvalidInput("a token's lifetime must be positive")
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
    }
    auth = settings.auth
    if auth.issuer:
        claims["iss"] = auth.issuer
    if auth.audience:
        claims["aud"] = auth.audience
    return jwt.encode(claims, ensure_secret(settings), algorithm=auth.algorithms[0])


# Units in descending order, each at most once: "1d12h", not "12h1d" or "1d1d".
_DURATION_RE = re.compile(
    r"(?:(?P<w>\d{1,9})w)?(?:(?P<d>\d{1,9})d)?(?:(?P<h>\d{1,9})h)?"
    r"(?:(?P<m>\d{1,9})m)?(?:(?P<s>\d{1,9})s)?"
)
_UNIT_SECONDS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
MAX_DURATION = dt.timedelta(days=3650)


def parse_duration(text: str) -> dt.timedelta:
    """Read `30d`, `12h`, `15m`, `45s`, `2w` or a combination like `1d12h` (at most 10 years)."""
    cleaned = text.strip().lower()
    match = _DURATION_RE.fullmatch(cleaned)
    shown = repr(text) if len(text) <= 40 else repr(text[:40] + "...")
    if not cleaned or match is None:
        raise InvalidInput(
            f"bad duration {shown}: use a number and a unit (w, d, h, m, s), "
            "largest unit first, like 30d, 12h or 1d12h"
        )
    seconds = sum(
        int(value) * _UNIT_SECONDS[unit] for unit, value in match.groupdict().items() if value
    )
    if seconds <= 0:
        raise InvalidInput(f"bad duration {shown}: it must be longer than zero")
    if seconds > MAX_DURATION.total_seconds():
        raise InvalidInput(f"bad duration {shown}: at most {MAX_DURATION.days} days (10 years)")
    return dt.timedelta(seconds=seconds)
