"""The in-process command line (typer's runner) on a test memory, fast enough for the
inner loop; tests/cli/test_commands.py runs the real process."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from typer.testing import CliRunner, Result

from app import cli
from app.settings import Settings
from tests.conftest import TEST_WIDTH

Invoke = Callable[..., Result]


@pytest.fixture
def cli_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The CLI on the test memory's home (EMBORNAL_HOME), no model, the test width."""
    monkeypatch.setenv("EMBORNAL_HOME", str(settings.dirs.config_dir))
    monkeypatch.setenv("EMBORNAL_EMBEDDING__MODEL", "none")
    monkeypatch.setenv("EMBORNAL_EMBEDDING__WIDTH", str(TEST_WIDTH))
    monkeypatch.delenv("EMBORNAL_JWT_SECRET", raising=False)
    # The CLI keeps its settings for the process; each invocation here is a new command.
    monkeypatch.setattr(cli.state, "settings", None)
    return settings


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    def run(*args: str) -> Result:
        monkeypatch.setattr(cli.state, "settings", None)
        return CliRunner().invoke(cli.app, list(args))

    return run


# The app and its client, for tests where the CLI and a server meet.
from tests.api.conftest import app, auth, client  # noqa: E402, F401
