"""config.yaml with EMBORNAL_<SECTION>__<KEY> overrides; bad keys stop start-up by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.dirs import Dirs
from app.errors import ConfigError
from app.settings import load_settings


def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path, tmp_path, tmp_path)


def test_defaults_are_the_spec_keys(tmp_path: Path) -> None:
    s = load_settings(dirs(tmp_path), env={})
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8420)
    assert s.database.path is None and s.database_path == tmp_path / "memory.db"
    assert (s.embedding.model, s.embedding.width) == ("bge-base-en-v1.5", 768)
    assert s.auth.algorithms == ["HS256"] and s.auth.leeway_seconds == 30
    assert s.limits.content_chars == 4000


def test_file_then_environment(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("server:\n  port: 9000\nembedding:\n  width: 384\n")
    env = {"EMBORNAL_SERVER__PORT": "9100", "EMBORNAL_AUTH__AUDIENCE": "embornal"}
    s = load_settings(dirs(tmp_path), env=env)
    assert s.server.port == 9100 and s.embedding.width == 384
    assert s.auth.audience == "embornal"


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server:\n  prot: 9000\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(dirs(tmp_path), env={})
    assert "server.prot" in caught.value.detail and str(config) in caught.value.detail


def test_bad_value_names_key_and_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(dirs(tmp_path), env={"EMBORNAL_SERVER__PORT": "many"})
    assert "server.port" in caught.value.detail
    assert "EMBORNAL_SERVER__PORT" in caught.value.detail


def test_an_unknown_section_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    """It named config.yaml, which may not even exist."""
    with pytest.raises(ConfigError) as caught:
        load_settings(dirs(tmp_path), env={"EMBORNAL_FOO__BAR": "1"})
    assert caught.value.detail == "EMBORNAL_FOO__BAR: unknown key 'foo'"
    # Named in the file too: the file is blamed, as before.
    config = tmp_path / "config.yaml"
    config.write_text("foo:\n  baz: 2\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(dirs(tmp_path), env={"EMBORNAL_FOO__BAR": "1"})
    assert caught.value.detail == f"{config}: unknown key 'foo'"


def test_mixed_algorithm_families_are_refused(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("auth:\n  algorithms: [HS256, RS256]\n")
    with pytest.raises(ConfigError, match=r"auth\.algorithms"):
        load_settings(dirs(tmp_path), env={})


def test_broken_yaml_is_one_line_naming_the_file_and_the_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server:\n  port: 8420\n  host: [127.0.0.1\nlimits:\n  content_chars: 10\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(Dirs(tmp_path, tmp_path, tmp_path), env={})
    message = caught.value.detail
    assert "\n" not in message
    assert message.startswith(f"{config}:4: the config file is not valid YAML: ")


def test_a_config_file_not_in_utf8_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """A UTF-16 file (its byte order mark here) gave a UnicodeDecodeError traceback."""
    config = tmp_path / "config.yaml"
    config.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError) as caught:
        load_settings(dirs(tmp_path), env={})
    assert caught.value.detail == (
        f"{config}: the config file is not UTF-8 text (byte 0xff at offset 0); save it as UTF-8"
    )


def test_database_url_picks_postgres_and_the_password_comes_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "db-password"
    secret.write_text("s3cret-pass\n")
    env = {
        "EMBORNAL_DATABASE__URL": "postgresql+psycopg://embornal@db.internal:5432/memory",
        "EMBORNAL_DATABASE__PASSWORD_FILE": str(secret),
        "EMBORNAL_DATABASE__POOL_SIZE": "20",
        "EMBORNAL_DATABASE__STATEMENT_TIMEOUT_MS": "5000",
    }
    s = load_settings(dirs(tmp_path), env=env)
    url = s.database.sqlalchemy_url()
    assert url is not None and url.password == "s3cret-pass"
    assert (url.host, url.database, url.username) == ("db.internal", "memory", "embornal")
    assert (s.database.pool_size, s.database.statement_timeout_ms) == (20, 5000)
    # Neither what the CLI shows nor the settings' repr holds the password.
    assert "s3cret" not in s.database_shown and "s3cret" not in repr(s)


def test_a_password_in_the_url_or_the_environment_is_never_shown(tmp_path: Path) -> None:
    env = {"EMBORNAL_DATABASE__URL": "postgresql+psycopg://u:in-url@h/db"}
    s = load_settings(dirs(tmp_path), env=env)
    assert s.database.sqlalchemy_url().password == "in-url"  # type: ignore[union-attr]
    assert "in-url" not in s.database_shown and "in-url" not in repr(s)
    # libpq's parameter forms, which connect as well.
    for url in (
        "postgresql+psycopg://u@h/db?password=in-query",
        "postgresql+psycopg:///db?host=h&user=u&password=in-query",
        "postgresql+psycopg://u@h/db?sslpassword=in-query",
    ):
        s = load_settings(dirs(tmp_path), env={"EMBORNAL_DATABASE__URL": url})
        assert "in-query" not in s.database_shown and "in-query" not in repr(s), url
        assert "password=hidden" in s.database_shown
    env = {"EMBORNAL_DATABASE__URL": "postgresql://u@h/db", "EMBORNAL_DATABASE__PASSWORD": "e"}
    s = load_settings(dirs(tmp_path), env=env)
    url = s.database.sqlalchemy_url()
    assert url is not None and url.password == "e" and url.drivername == "postgresql+psycopg"


def test_without_a_url_the_sqlite_file_is_the_memory(tmp_path: Path) -> None:
    s = load_settings(dirs(tmp_path), env={})
    assert s.database.sqlalchemy_url() is None and s.database_shown == str(tmp_path / "memory.db")


@pytest.mark.parametrize(
    "url", ["mysql://u@h/db", "sqlite:///x.db", "postgresql+asyncpg://u@h/db", "not a url"]
)
def test_only_a_postgres_url_is_taken_and_the_message_names_the_key(
    tmp_path: Path, url: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(dirs(tmp_path), env={"EMBORNAL_DATABASE__URL": url})
    assert "EMBORNAL_DATABASE__URL" in caught.value.detail


def test_an_unreachable_database_stops_start_up_in_one_line_without_the_password(
    tmp_path: Path,
) -> None:
    from app.errors import StartupError
    from app.runtime import open_runtime

    env = {
        "EMBORNAL_DATABASE__URL": "postgresql+psycopg://u:sekrit@127.0.0.1:1/db",
        "EMBORNAL_EMBEDDING__MODEL": "none",
    }
    with pytest.raises(StartupError) as caught:
        open_runtime(load_settings(dirs(tmp_path), env=env))
    message = caught.value.detail
    assert "127.0.0.1" in message and "sekrit" not in message and "\n" not in message


def test_http_keys_are_checked_and_decide_the_hosts(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "http:\n  public_url: https://memory.example.org/\n  cors_origins: [https://app.example]\n"
    )
    s = load_settings(dirs(tmp_path), env={})
    assert s.http.public_url == "https://memory.example.org"
    assert s.http.hosts_for("127.0.0.1") is None  # URLs come from public_url
    assert load_settings(dirs(tmp_path / "x"), env={}).http.hosts_for("127.0.0.1") == {
        "127.0.0.1",
        "localhost",
        "::1",
    }
    for variable, value in (
        ("EMBORNAL_HTTP__PUBLIC_URL", "ftp://x"),
        ("EMBORNAL_HTTP__CORS_ORIGINS", '["https://app.example/path"]'),
    ):
        with pytest.raises(ConfigError) as caught:
            load_settings(dirs(tmp_path), env={variable: value})
        assert variable in caught.value.detail
