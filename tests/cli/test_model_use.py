"""`embornal model use NAME` writes the two keys into the owner's config.yaml and leaves
the rest of it as written (tests/test_config_edit.py holds the cases of the edit); and,
with the model it switched to, a store refused as a duplicate is told in the command
line's words."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from app import cli
from app.embeddings.catalog import ModelSpec
from app.embeddings.loader import NO_MODEL_REASON
from app.errors import EmbornalError
from app.settings import Settings
from tests.conftest import TEST_WIDTH, TINY, TINY_WIDTH

OWNED = f"""\
# The memory on my laptop.

server:
  port: 9999               # 8420 is taken
  log_level: "debug"

embedding:
  # none until the model is fetched
  model: none              # keyword search only
  width: {TEST_WIDTH}                # the memory's width
  batch_size: 8            # a small machine

# Tokens live a month at most.
auth:
  max_token_lifetime: 30d
"""


@pytest.fixture
def home_env(home: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The command line on the test memory, no EMBORNAL_EMBEDDING__* variable: the
    config file decides."""
    monkeypatch.setenv("EMBORNAL_HOME", str(home))
    for name in ("EMBORNAL_EMBEDDING__MODEL", "EMBORNAL_EMBEDDING__WIDTH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cli.state, "settings", None)
    return home


def use(name: str) -> Result:
    return CliRunner().invoke(cli.app, ["model", "use", name])


def test_model_use_keeps_the_owners_config_but_the_two_values(
    home_env: Path, tiny_model: ModelSpec
) -> None:
    config = home_env / "config.yaml"
    config.write_text(OWNED)
    config.chmod(0o600)
    switched = use(TINY)
    assert switched.exit_code == 0, switched.output
    assert f"embedding.model = {TINY}, embedding.width = {TINY_WIDTH}" in switched.output
    assert config.read_text() == OWNED.replace(
        "model: none              #", f"model: {TINY}           #"
    ).replace(f"width: {TEST_WIDTH}                #", f"width: {TINY_WIDTH}                #")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_model_use_without_a_config_file_makes_a_private_one(
    home_env: Path, tiny_model: ModelSpec
) -> None:
    config = home_env / "config.yaml"
    assert not config.exists()
    switched = use(TINY)
    assert switched.exit_code == 0, switched.output
    assert config.read_text() == f"embedding:\n  model: {TINY}\n  width: {TINY_WIDTH}\n"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_model_use_adds_the_section_a_config_lacks(home_env: Path, tiny_model: ModelSpec) -> None:
    config = home_env / "config.yaml"
    text = "# only the port\nserver:\n  port: 9999  # 8420 is taken\n"
    config.write_text(text)
    switched = use(TINY)
    assert switched.exit_code == 0, switched.output
    assert config.read_text() == text + f"embedding:\n  model: {TINY}\n  width: {TINY_WIDTH}\n"


def test_a_refused_duplicate_is_told_in_the_command_lines_words(
    home_env: Path, tiny_model: ModelSpec
) -> None:
    """The use case's refusal names REST's parameters; the command line names its flags."""
    assert use(TINY).exit_code == 0  # the test memory moved to the tiny model
    store = ["memory", "store", "/home/net", "The router's admin page is on port 8081."]
    first = CliRunner().invoke(cli.app, [*store, "--json"])
    assert first.exit_code == 0, first.output
    refused = CliRunner().invoke(cli.app, [*store, "--on-duplicate", "refuse"])
    assert refused.exit_code == 1
    told = str(refused.exception)  # what `embornal` prints on its one error line
    fact_id = json.loads(first.stdout)["id"]
    assert f"--supersedes {fact_id} to correct that fact" in told
    assert "without --on-duplicate refuse" in told
    assert "supersedes_id" not in told and "on_duplicate=" not in told


def run(*args: str) -> Result:
    cli.state.settings = None  # each invocation is a new command
    return CliRunner().invoke(cli.app, list(args))


def refusal(result: Result) -> str:
    """What `embornal` prints as the error of a command that failed (app.cli.main)."""
    assert isinstance(result.exception, EmbornalError), result.output
    return result.exception.detail


@pytest.mark.parametrize(
    "config",
    [
        # `none` alone: its default width (768) is not the memory's 32.
        pytest.param("embedding:\n  model: none\n", id="file"),
        # The file `model use` wrote (the memory's model and width), overridden.
        pytest.param(None, id="variable"),
    ],
)
def test_no_model_configured_on_a_memory_with_vectors_searches_by_keyword(
    home_env: Path, tiny_model: ModelSpec, monkeypatch: pytest.MonkeyPatch, config: str | None
) -> None:
    """Before: `none` alone stopped every command on the width check (whose advice,
    `memory reindex --rebuild`, then failed for want of a model), and `none` at the
    memory's width loaded the model the memory names and searched hybrid."""
    assert use(TINY).exit_code == 0
    assert run("memory", "store", "/home", "the kettle on the stove is blue").exit_code == 0
    if config is None:
        monkeypatch.setenv("EMBORNAL_EMBEDDING__MODEL", "none")
    else:
        (home_env / "config.yaml").write_text(config)

    found = run("memory", "search", "kettle")
    assert found.exit_code == 0, found.output
    assert "1 found (keyword search)" in found.output
    for mode in ("semantic", "hybrid"):
        refused = refusal(run("memory", "search", "kettle", "--mode", mode))
        assert refused == f"{mode} search needs an embedding model: {NO_MODEL_REASON}"
    stored = run("memory", "store", "/home", "the pot is red", "--json")
    assert stored.exit_code == 0, stored.output
    assert '"embedded": false' in stored.output
    info = run("model", "info")
    assert info.exit_code == 0, info.output
    assert "name: none" in info.output and f"vectors come from {TINY}" in info.output
    # A rebuild still needs a model, and says so (no width disagreement sends one here).
    assert refusal(run("memory", "reindex", "--rebuild")) == (
        f"no model to embed with: {NO_MODEL_REASON}"
    )


def test_a_catalog_model_named_without_a_width_has_its_own(
    home_env: Path, tiny_model: ModelSpec
) -> None:
    """Before: `model: NAME` alone kept the default model's width (768) and every command
    stopped on the width check against the memory's and the model's own."""
    assert use(TINY).exit_code == 0
    assert run("memory", "store", "/home", "the kettle on the stove is blue").exit_code == 0
    (home_env / "config.yaml").write_text(f"embedding:\n  model: {TINY}\n")
    found = run("memory", "search", "kettle on the stove", "--mode", "semantic")
    assert found.exit_code == 0, found.output
    assert "(semantic search)" in found.output and "the kettle on the stove" in found.output
    # A width given still counts, and disagreeing still stops the command.
    (home_env / "config.yaml").write_text(f"embedding:\n  model: {TINY}\n  width: 64\n")
    assert "width disagreement" in refusal(run("memory", "search", "kettle"))
