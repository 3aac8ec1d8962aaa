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
