"""The key sources: the generated secret file, a configured one, the env override, PEM files."""

from __future__ import annotations

import errno
import stat
import sys
import threading

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.auth import keys
from app.auth.keys import SECRET_ENV, ensure_secret, key_source, load_public_key
from app.auth.tokens import TokenVerifier
from app.dirs import Dirs
from app.errors import ConfigError
from app.settings import Settings

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


@posix_only
def test_secret_file_created_0600_and_reused(settings_with, tmp_path):
    settings = settings_with()
    path = settings.secret_path
    assert path == tmp_path / "jwt-secret"
    first = ensure_secret(settings)
    assert len(first) >= 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_secret(settings) == first
    assert path.read_bytes().strip() == first
    # No temporary file left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jwt-secret"]


@posix_only
def test_a_killed_starts_temporary_key_goes_when_the_key_is_made(settings_with, tmp_path):
    settings = settings_with()
    left = tmp_path / ".jwt-secret.deadbeef.tmp"  # as a start killed mid-write leaves it
    left.write_text("half a key")
    ensure_secret(settings)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jwt-secret"]


@posix_only
def test_secret_parent_dir_created_0700(tmp_path):
    config_dir = tmp_path / "cfg" / "embornal"
    settings = Settings(dirs=Dirs(config_dir, tmp_path, tmp_path))
    ensure_secret(settings)
    assert stat.S_IMODE(config_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((config_dir / "jwt-secret").stat().st_mode) == 0o600


def test_secret_file_differs_per_install(tmp_path):
    one = Settings(dirs=Dirs(tmp_path / "a", tmp_path, tmp_path))
    two = Settings(dirs=Dirs(tmp_path / "b", tmp_path, tmp_path))
    assert ensure_secret(one) != ensure_secret(two)


def test_concurrent_first_starts_agree(settings_with, tmp_path):
    settings = settings_with()
    barrier = threading.Barrier(8)
    results: list[bytes] = []

    def start() -> None:
        barrier.wait()
        results.append(ensure_secret(settings))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    assert len(set(results)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jwt-secret"]


@posix_only
def test_secret_created_without_hard_links(settings_with, tmp_path, monkeypatch):
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(keys.os, "link", no_links)
    settings = settings_with()
    first = ensure_secret(settings)
    assert stat.S_IMODE(settings.secret_path.stat().st_mode) == 0o600
    assert ensure_secret(settings) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jwt-secret"]


def test_existing_default_secret_is_kept(settings_with, tmp_path):
    (tmp_path / "jwt-secret").write_text("s" * 40 + "\n")
    assert ensure_secret(settings_with()) == b"s" * 40


def test_configured_secret_file_is_read_and_stripped(settings_with, tmp_path):
    path = tmp_path / "mounted-secret"
    path.write_text("  " + "k" * 32 + "\n\n")
    assert ensure_secret(settings_with(secret_file=path)) == b"k" * 32


def test_configured_missing_secret_file_names_it(settings_with, tmp_path):
    path = tmp_path / "run" / "secrets" / "jwt"
    settings = settings_with(secret_file=path)
    with pytest.raises(ConfigError, match=str(path)):
        ensure_secret(settings)
    assert not path.exists()  # a configured file is never created
    with pytest.raises(ConfigError, match=str(path)):
        TokenVerifier(settings)


def test_configured_empty_secret_file(settings_with, tmp_path):
    path = tmp_path / "secret"
    path.write_text(" \n")
    with pytest.raises(ConfigError, match="empty") as caught:
        ensure_secret(settings_with(secret_file=path))
    assert str(path) in caught.value.detail


def test_short_secret_refused_without_printing_it(settings_with, tmp_path):
    path = tmp_path / "secret"
    path.write_text("hunter2-is-secret")
    with pytest.raises(ConfigError) as caught:
        ensure_secret(settings_with(secret_file=path))
    assert str(path) in caught.value.detail
    assert "hunter2" not in caught.value.detail


def test_hs512_needs_a_longer_secret(settings_with, tmp_path):
    path = tmp_path / "secret"
    path.write_text("k" * 40)
    assert ensure_secret(settings_with(secret_file=path)) == b"k" * 40
    with pytest.raises(ConfigError, match="64"):
        ensure_secret(settings_with(secret_file=path, algorithms=["HS512"]))


def test_env_secret_overrides_files(settings_with, tmp_path):
    settings = settings_with(secret_file=tmp_path / "absent")
    assert ensure_secret(settings, env={SECRET_ENV: " " + "v" * 32 + " "}) == b"v" * 32
    # Empty means unset: the configured (missing) file is used, and refused.
    with pytest.raises(ConfigError, match="absent"):
        ensure_secret(settings, env={SECRET_ENV: ""})


def test_short_env_secret_names_the_variable(settings_with):
    with pytest.raises(ConfigError, match=SECRET_ENV) as caught:
        ensure_secret(settings_with(), env={SECRET_ENV: "tiny-secret"})
    assert "tiny-secret" not in caught.value.detail


def test_pem_as_shared_secret_is_a_config_error(settings_with, tmp_path, rsa_key, public_pem):
    path = tmp_path / "secret"
    path.write_bytes(public_pem(rsa_key))
    with pytest.raises(ConfigError, match=str(path)):
        TokenVerifier(settings_with(secret_file=path))


def test_no_shared_secret_for_public_key_setups(settings_with, tmp_path):
    settings = settings_with(algorithms=["RS256"], jwks_url="http://127.0.0.1:1/jwks")
    with pytest.raises(ConfigError):
        ensure_secret(settings)
    assert not (tmp_path / "jwt-secret").exists()


# --- key source selection -------------------------------------------------------------------


def test_key_source_selection(settings_with, tmp_path):
    pem = tmp_path / "k.pem"
    assert key_source(settings_with()) == "secret"
    assert key_source(settings_with(algorithms=["ES256"], public_key_file=pem)) == "public_key"
    assert key_source(settings_with(algorithms=["EdDSA"], jwks_url="https://idp/jwks")) == "jwks"


@pytest.mark.parametrize(
    ("auth", "named"),
    [
        ({"jwks_url": "https://idp/jwks"}, "auth.jwks_url"),
        ({"public_key_file": "k.pem"}, "auth.public_key_file"),
        ({"algorithms": ["RS256"]}, "auth.public_key_file or auth.jwks_url"),
        (
            {"algorithms": ["RS256"], "public_key_file": "k.pem", "jwks_url": "https://i/j"},
            "exclude each other",
        ),
        ({"algorithms": ["RS256"], "secret_file": "s", "jwks_url": "https://i/j"}, "secret_file"),
    ],
)
def test_inconsistent_auth_settings(settings_with, auth, named):
    with pytest.raises(ConfigError, match=named):
        key_source(settings_with(**auth))


# --- public key files ------------------------------------------------------------------------


def test_missing_public_key_file_names_it(settings_with, tmp_path):
    path = tmp_path / "nope.pem"
    settings = settings_with(algorithms=["RS256"], public_key_file=path)
    with pytest.raises(ConfigError, match=str(path)):
        load_public_key(settings)
    with pytest.raises(ConfigError, match=str(path)):
        TokenVerifier(settings)


def test_garbage_public_key_file(settings_with, tmp_path):
    path = tmp_path / "bad.pem"
    path.write_text("-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n")
    with pytest.raises(ConfigError, match="not a PEM public key"):
        load_public_key(settings_with(algorithms=["RS256"], public_key_file=path))


def test_private_key_in_public_key_file_is_refused(settings_with, tmp_path, rsa_key):
    path = tmp_path / "private.pem"
    path.write_bytes(
        rsa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ConfigError, match="private key"):
        load_public_key(settings_with(algorithms=["RS256"], public_key_file=path))


@pytest.mark.parametrize("algorithms", [["ES256"], ["EdDSA"], ["RS256", "ES256"]])
def test_public_key_must_fit_every_algorithm(
    settings_with, tmp_path, rsa_key, public_pem, algorithms
):
    path = tmp_path / "rsa.pem"
    path.write_bytes(public_pem(rsa_key))
    with pytest.raises(ConfigError, match="does not fit"):
        TokenVerifier(settings_with(algorithms=algorithms, public_key_file=path))


def test_ec_curve_must_match(settings_with, tmp_path, public_pem):
    path = tmp_path / "p384.pem"
    path.write_bytes(public_pem(ec.generate_private_key(ec.SECP384R1())))
    with pytest.raises(ConfigError, match="ES256"):
        TokenVerifier(settings_with(algorithms=["ES256"], public_key_file=path))
    assert TokenVerifier(settings_with(algorithms=["ES384"], public_key_file=path))


def test_public_key_path_that_is_a_directory(settings_with, tmp_path):
    # Unreadable even for root, unlike a chmod 0 file.
    with pytest.raises(ConfigError, match=str(tmp_path)):
        load_public_key(settings_with(algorithms=["RS256"], public_key_file=tmp_path))
