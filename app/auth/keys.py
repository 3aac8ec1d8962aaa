"""Where the token keys come from (SPEC "Auth"): a shared secret, a public key file, or JWKS.

The shared secret, for HS* algorithms, is found in this order:

1. the environment variable ``EMBORNAL_JWT_SECRET`` when it is set and non-empty
   (for containers that pass secrets through the environment);
2. ``auth.secret_file`` when configured; it must exist (a container mounts it);
3. otherwise ``<config_dir>/jwt-secret``, which the first start creates with
   random bytes and mode 0600, and later starts read.

Its text (whitespace stripped) is the HMAC key as it stands, so any tool that reads
the same file signs tokens this service accepts. No message ever holds the secret.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from app.dirs import make_private_dir
from app.errors import ConfigError
from app.files import locked_temp
from app.settings import Settings

logger = logging.getLogger(__name__)

SECRET_ENV = "EMBORNAL_JWT_SECRET"
# 64 random bytes: as long as the largest HMAC digest (HS512), as RFC 7518 3.2 asks.
GENERATED_SECRET_BYTES = 64
_HMAC_MIN_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}

KeySource = Literal["secret", "public_key", "jwks"]


def uses_shared_secret(settings: Settings) -> bool:
    """True when the configured algorithms are HMAC ones (the settings forbid mixing)."""
    return settings.auth.algorithms[0].startswith("HS")


def key_source(settings: Settings) -> KeySource:
    """Say which key source the auth settings select, or raise ConfigError if they disagree."""
    auth = settings.auth
    algorithms = ", ".join(auth.algorithms)
    if uses_shared_secret(settings):
        # A JWKS URL or key file beside HS* algorithms is a half-finished switch to an
        # identity provider; guessing which one was meant would hide the mistake.
        for key, value in (("public_key_file", auth.public_key_file), ("jwks_url", auth.jwks_url)):
            if value is not None:
                raise ConfigError(
                    f"auth.{key} needs public-key algorithms (RS256, ES256, EdDSA, ...) "
                    f"in auth.algorithms, which is [{algorithms}]"
                )
        return "secret"
    if auth.secret_file is not None:
        raise ConfigError(
            f"auth.secret_file is for HS* algorithms; auth.algorithms is [{algorithms}]"
        )
    if auth.public_key_file is not None and auth.jwks_url is not None:
        raise ConfigError("auth.public_key_file and auth.jwks_url exclude each other: set one")
    if auth.public_key_file is not None:
        return "public_key"
    if auth.jwks_url is not None:
        return "jwks"
    raise ConfigError(f"auth.algorithms [{algorithms}] needs auth.public_key_file or auth.jwks_url")


def secret_origin(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """Name where the shared secret comes from (the variable or the file), for messages."""
    env = os.environ if env is None else env
    return SECRET_ENV if env.get(SECRET_ENV, "").strip() else str(settings.secret_path)


def ensure_secret(settings: Settings, env: Mapping[str, str] | None = None) -> bytes:
    """Return the HMAC secret, creating the default key file on first use (see module doc)."""
    if not uses_shared_secret(settings):
        raise ConfigError(
            "no shared secret with public-key algorithms: "
            f"auth.algorithms is [{', '.join(settings.auth.algorithms)}]"
        )
    env = os.environ if env is None else env
    from_env = env.get(SECRET_ENV, "").strip()
    if from_env:
        return _checked(from_env.encode("utf-8"), SECRET_ENV, settings)

    path = settings.secret_path
    if settings.auth.secret_file is None:
        _create_secret_file(path)
    try:
        secret = path.read_bytes().strip()
    except FileNotFoundError:
        raise ConfigError(f"{path}: the secret file does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the secret file: {exc.strerror}") from None
    if not secret:
        raise ConfigError(f"{path}: the secret file is empty")
    return _checked(secret, str(path), settings)


def _checked(secret: bytes, where: str, settings: Settings) -> bytes:
    # A short HMAC key can be brute-forced offline from any one token it signed.
    need = max(_HMAC_MIN_BYTES[alg] for alg in settings.auth.algorithms)
    if len(secret) < need:
        raise ConfigError(
            f"{where}: the secret is {len(secret)} bytes; "
            f"[{', '.join(settings.auth.algorithms)}] needs at least {need}"
        )
    return secret


def _create_secret_file(path: Path) -> None:
    """Create the key file once, complete and mode 0600, even when two processes race."""
    if path.exists():
        _warn_if_open(path)
        return
    text = (secrets.token_urlsafe(GENERATED_SECRET_BYTES) + "\n").encode("ascii")
    # Write a private temporary file, then hard-link it into place: the link either
    # appears with the whole key in it or fails because another process won, so no
    # reader ever sees a half-written file and nobody overwrites a key in use. The
    # temporary file is locked while it lives (app.files): one that a start killed
    # before its key was in place left goes when the next start makes the key.
    try:
        make_private_dir(path.parent)
        with locked_temp(path) as tmp:
            _write(os.open(tmp, os.O_WRONLY), text)
            try:
                os.link(tmp, path)
                logger.info("created the token signing key %s", path)
            except FileExistsError:
                pass  # another process created it first; use theirs
            except OSError:
                # Some filesystems (certain network and FUSE mounts) have no hard links:
                # fall back to an exclusive create, which is still never an overwrite.
                with contextlib.suppress(FileExistsError):
                    _write_new(path, text)
                    logger.info("created the token signing key %s", path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the secret file: {exc.strerror}") from None


def _write_new(path: Path, data: bytes) -> None:
    # O_EXCL: fail rather than follow or reuse anything already at this path.
    _write(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), data)


def _write(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _warn_if_open(path: Path) -> None:
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(path.stat().st_mode)
        if os.name == "posix" and mode & 0o077:
            logger.warning("%s is readable by others (mode %o); chmod 600 it", path, mode)


def load_public_key(settings: Settings) -> PublicKeyTypes:
    """Read auth.public_key_file (a PEM public key), or raise ConfigError naming the file."""
    path = settings.auth.public_key_file
    if path is None:
        raise ConfigError("auth.public_key_file is not set")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the public key file: {exc.strerror}") from None
    if b"PRIVATE KEY" in data:
        # Verification needs only the public half; a private key here is one leak away.
        raise ConfigError(f"{path}: holds a private key; give the PEM public key instead")
    try:
        return load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"{path}: is not a PEM public key") from None
