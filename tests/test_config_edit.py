"""`model use` changes embedding.model and embedding.width in config.yaml and nothing
else of the owner's file: comments, order, blank lines, quoting, line ends, mode."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from app.config_edit import set_embedding_model, with_keys
from app.dirs import Dirs
from app.errors import ConfigError, EmbornalError

ROOT = Path(__file__).resolve().parent.parent

# An owner's config: comments on keys and sections, blank lines, quoting, nulls, a flow
# list, aligned comments, a long line.
OWNED = """\
# My embornal, on the NAS. Back this file up with memory.db.

server:
  host: "0.0.0.0"          # behind the reverse proxy
  port: 8420

# PostgreSQL since March
database:
  url: 'postgresql+psycopg://embornal@db/embornal'
  password_file: null      # the proxy's secret, mounted
  path: ~

embedding:
  # the model; width follows it
  model: bge-base-en-v1.5  # the default, spelled out
  width: 768               # bge's
  threads: 2               # the NAS has 4 cores

auth:
  algorithms: [HS256]
  leeway_seconds: 30
# the end
"""


def dirs(home: Path) -> Dirs:
    return Dirs(home, home, home)


def owned(home: Path, text: str, mode: int = 0o600) -> Path:
    home.mkdir(exist_ok=True)
    config = home / "config.yaml"
    config.write_bytes(text.encode())
    config.chmod(mode)
    return config


def use(home: Path, model: str = "minilm-l6", width: int = 384) -> None:
    set_embedding_model(dirs(home), model, width, env={})


def test_a_commented_config_keeps_every_byte_but_the_two_values(tmp_path: Path) -> None:
    config = owned(tmp_path, OWNED)
    use(tmp_path)
    # Each value in place; its comment stays in its column.
    assert config.read_bytes().decode() == OWNED.replace(
        "  model: bge-base-en-v1.5  # the default", "  model: minilm-l6         # the default"
    ).replace("  width: 768               # bge's", "  width: 384               # bge's")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_the_documented_config_changes_on_two_lines(tmp_path: Path) -> None:
    """docs/configuration.md's every-key example, as an owner would copy it."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    text = re.search(r"```yaml\n(.*?)```", page, re.S)[1]  # type: ignore[index]
    config = owned(tmp_path, text)
    use(tmp_path)
    before, after = text.splitlines(), config.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert [(a.split("#")[0].split(), b.split("#")[0].split()) for a, b in changed] == [
        (["model:", "bge-base-en-v1.5"], ["model:", "minilm-l6"]),
        (["width:", "768"], ["width:", "384"]),
    ]
    assert [a.index("#") for a, _ in changed] == [b.index("#") for _, b in changed]


def test_no_config_file_makes_one_for_the_owner_alone(tmp_path: Path) -> None:
    home = tmp_path / "new"
    use(home)
    config = home / "config.yaml"
    assert config.read_text() == "embedding:\n  model: minilm-l6\n  width: 384\n"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert [p.name for p in home.iterdir()] == ["config.yaml"]  # no temp file left


def test_a_config_without_embedding_gets_the_section_at_its_end(tmp_path: Path) -> None:
    text = "# mine\nserver:\n    port: 9000  # not the default\n\n# the end\n"
    config = owned(tmp_path, text)
    use(tmp_path)
    # Indented as the file's other sections are.
    assert config.read_text() == text + "embedding:\n    model: minilm-l6\n    width: 384\n"


def test_the_files_own_mode_is_kept(tmp_path: Path) -> None:
    config = owned(tmp_path, "server:\n  port: 9000\n", mode=0o640)
    use(tmp_path)
    assert stat.S_IMODE(config.stat().st_mode) == 0o640


def test_a_linked_config_stays_a_link_and_its_file_is_edited(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    real = owned(dotfiles, "server:\n  port: 9000\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").symlink_to(real)
    use(home)
    assert (home / "config.yaml").is_symlink()
    assert real.read_text().endswith("embedding:\n  model: minilm-l6\n  width: 384\n")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("", "embedding:\n  model: M\n  width: 8\n", id="empty"),
        pytest.param(
            "# nothing yet\n", "# nothing yet\nembedding:\n  model: M\n  width: 8\n", id="comments"
        ),
        pytest.param(
            "server:\n  port: 1",
            "server:\n  port: 1\nembedding:\n  model: M\n  width: 8\n",
            id="no-final-newline",
        ),
        pytest.param(
            "---\nserver:\n  port: 1\n...\n",
            "---\nserver:\n  port: 1\nembedding:\n  model: M\n  width: 8\n...\n",
            id="document-markers",
        ),
        # The README's form: the section named, its keys commented out.
        pytest.param(
            "embedding:\n  # model: bge-base-en-v1.5  # leave unset\nauth: {}\n",
            "embedding:\n  model: M\n  width: 8\n  # model: bge-base-en-v1.5  # leave unset\n"
            "auth: {}\n",
            id="section-empty",
        ),
        pytest.param(
            "embedding: null  # later\n",
            "embedding:       # later\n  model: M\n  width: 8\n",
            id="section-null",
        ),
        pytest.param(
            "embedding:\n  # onnxruntime's\n  threads: 2\n",
            "embedding:\n  model: M\n  width: 8\n  # onnxruntime's\n  threads: 2\n",
            id="section-without-the-keys",
        ),
        pytest.param(
            "embedding:\n  threads: 2\n  model: x  # mine\nauth: {}\n",
            "embedding:\n  threads: 2\n  model: M  # mine\n  width: 8\nauth: {}\n",
            id="width-after-model",
        ),
        pytest.param(
            "embedding: {model: x, width: 16}  # flow\n",
            "embedding: {model: M, width: 8}  # flow\n",
            id="flow",
        ),
        pytest.param(
            "embedding: {threads: 2}\n",
            "embedding: {model: M, width: 8, threads: 2}\n",
            id="flow-without-the-keys",
        ),
        pytest.param("embedding: {}\n", "embedding: {model: M, width: 8}\n", id="flow-empty"),
        pytest.param(
            "embedding:\n  model: 'x'\n  width: 16\n",
            "embedding:\n  model: 'M'\n  width: 8\n",
            id="quoted",
        ),
        pytest.param(
            "embedding:\n  model:    # c\n  width:\n",
            "embedding:\n  model: M  # c\n  width: 8\n",
            id="keys-without-values",
        ),
        pytest.param(
            "embedding:\r\n  model: x\r\nserver:\r\n  port: 1 # c\r\n",
            "embedding:\r\n  model: M\r\n  width: 8\r\nserver:\r\n  port: 1 # c\r\n",
            id="crlf",
        ),
        pytest.param(
            "\ufeffserver:\n  port: 1\n",
            "\ufeffserver:\n  port: 1\nembedding:\n  model: M\n  width: 8\n",
            id="bom",
        ),
        pytest.param(
            "embedding:\n  model: x\n  model: y  # the last one counts\n",
            "embedding:\n  model: x\n  model: M  # the last one counts\n  width: 8\n",
            id="repeated-key",
        ),
    ],
)
def test_where_the_keys_go(before: str, after: str) -> None:
    assert with_keys(before, "embedding", {"model": "M", "width": 8}) == after


def test_a_model_name_yaml_would_read_otherwise_is_quoted() -> None:
    assert with_keys("", "embedding", {"model": "yes", "width": 8}) == (
        "embedding:\n  model: 'yes'\n  width: 8\n"
    )


def test_an_edit_that_would_change_another_key_leaves_the_file(tmp_path: Path) -> None:
    """auth.issuer is an alias of the model's value: editing the one would edit both."""
    text = "embedding:\n  model: &m bge-base-en-v1.5\nauth:\n  issuer: *m\n"
    config = owned(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        use(tmp_path)
    assert "is left as it was" in refused.value.detail
    assert "set embedding.model: minilm-l6, embedding.width: 384 in it by hand" in (
        refused.value.detail
    )
    assert config.read_text() == text


def test_a_file_that_would_not_load_is_not_written(tmp_path: Path) -> None:
    config = owned(tmp_path, OWNED)
    with pytest.raises(ConfigError) as refused:
        use(tmp_path, width=0)
    assert "is left as it was: the edited file would not load" in refused.value.detail
    assert "embedding.width" in refused.value.detail
    assert config.read_text() == OWNED


def test_a_failed_write_leaves_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = owned(tmp_path, OWNED)

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(EmbornalError, match="No space left on device"):
        use(tmp_path)
    assert config.read_text() == OWNED
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]


def test_the_settings_returned_are_the_files_under_the_variables(tmp_path: Path) -> None:
    owned(tmp_path, OWNED)
    env = {"EMBORNAL_EMBEDDING__THREADS": "3"}
    config = set_embedding_model(dirs(tmp_path), "minilm-l6", 384, env=env)
    assert (config.embedding.model, config.embedding.width) == ("minilm-l6", 384)
    assert config.embedding.threads == 3 and config.server.host == "0.0.0.0"


def test_a_key_a_variable_overrides_is_not_written(tmp_path: Path) -> None:
    """Before: the file was written, then `model use` refused (the variable won)."""
    config = owned(tmp_path, OWNED)
    env = {"EMBORNAL_EMBEDDING__WIDTH": "16"}
    with pytest.raises(ConfigError, match=r"EMBORNAL_EMBEDDING__WIDTH overrides config\.yaml"):
        set_embedding_model(dirs(tmp_path), "minilm-l6", 384, env=env)
    assert config.read_bytes() == OWNED.encode()
