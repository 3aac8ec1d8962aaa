"""`embornal token issue` makes tokens the app accepts; `embornal serve` runs this app."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app import cli
from app.errors import EmbornalError
from app.settings import Settings
from tests.api.conftest import assert_problem
from tests.conftest import TEST_WIDTH

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env |= {
        "EMBORNAL_HOME": str(home),
        "EMBORNAL_EMBEDDING__MODEL": "none",
        "EMBORNAL_EMBEDDING__WIDTH": str(TEST_WIDTH),
    }
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_issued_token_is_accepted(client: TestClient, cli_env: Settings) -> None:
    issued = CliRunner().invoke(
        cli.app, ["token", "issue", "--subject", "alice", "--expires", "1h", "--json"]
    )
    assert issued.exit_code == 0, issued.output
    body = json.loads(issued.stdout)
    assert body["subject"] == "alice" and body["expires_at"].endswith("Z")
    response = client.get("/v1/whoami", headers={"Authorization": f"Bearer {body['token']}"})
    assert response.status_code == 200, response.text
    assert response.json()["subject"] == "alice"

    plain = CliRunner().invoke(cli.app, ["token", "issue", "--subject", "bob"])
    assert plain.exit_code == 0 and plain.stdout.strip().count(".") == 2


def test_token_issue_refuses_a_bad_subject(cli_env: Settings) -> None:
    result = CliRunner().invoke(cli.app, ["token", "issue", "--subject", "a b"])
    assert isinstance(result.exception, EmbornalError)  # main() prints it in one line


def test_token_issue_refuses_bad_input_in_one_line(settings: Settings) -> None:
    result = run(
        settings.dirs.config_dir, "token", "issue", "--subject", "bob", "--expires", "soon"
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: bad duration") and result.stderr.count("\n") == 1


def test_serve_runs_the_app_with_settings_and_options(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch, auth
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(app: FastAPI, **options: Any) -> None:
        seen.update(options)
        with TestClient(app) as served:  # the app is usable: runtime and verifier in place
            seen["status"] = served.get("/v1/whoami", headers=auth("default")).status_code
            assert_problem(served.get("/v1/whoami"), 401)

    monkeypatch.setattr(uvicorn, "run", fake_run)
    result = CliRunner().invoke(cli.app, ["serve", "--port", "9123"])
    assert result.exit_code == 0, result.output
    assert seen["port"] == 9123
    assert seen["host"] == "127.0.0.1"
    assert seen["proxy_headers"] is True
    assert seen["status"] == 200
    # Headers and body are read under deadlines (tests/api/test_slow_clients.py).
    assert issubclass(seen["http"], asyncio.Protocol) and seen["http"].__name__ == "TimedProtocol"


def test_serve_closes_the_memory_when_the_app_stops(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch, auth
) -> None:
    """On SIGTERM uvicorn raises the signal again once the app has shut down, and the
    process ends there: the command's own close never ran, and memory.db-wal stayed
    beside memory.db, ready to be replayed over a backup put back in its place."""
    companions = [Path(f"{cli_env.database_path}{suffix}") for suffix in ("-wal", "-shm")]
    left: list[list[Path]] = []

    def fake_run(app: FastAPI, **_options: Any) -> None:
        with TestClient(app) as served:
            for i in range(20):
                stored = served.post(
                    "/v1/facts",
                    json={"path": "/x", "content": f"fact {i}"},
                    headers=auth("default"),
                )
                assert stored.status_code == 201, stored.text
            assert all(path.exists() for path in companions)
        left.append([path for path in companions if path.exists()])  # where SIGTERM ends it

    monkeypatch.setattr(uvicorn, "run", fake_run)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    result = CliRunner().invoke(cli.app, ["serve", "--port", str(port)])
    assert result.exit_code == 0, result.output
    assert left == [[]]


def test_token_issue_refuses_a_role_name(settings: Settings) -> None:
    home = settings.dirs.config_dir
    for role in ("admin", "everyone"):
        result = run(home, "token", "issue", "--subject", role)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.startswith(f"error: {role!r} is a role name")
        assert result.stderr.count("\n") == 1
    assert run(home, "policy", "add", "g, alice, reader").returncode == 0
    refused = run(home, "token", "issue", "--subject", "reader")
    assert refused.returncode == 1 and "role name" in refused.stderr
    assert run(home, "token", "issue", "--subject", "alice").returncode == 0


def test_policy_add_refuses_a_colliding_g_line_in_one_line(settings: Settings) -> None:
    result = run(settings.dirs.config_dir, "policy", "add", "g, bob, default")
    assert result.returncode == 1
    assert result.stderr.startswith("error: 'default' is a subject")
    assert result.stderr.count("\n") == 1


def test_token_issue_warns_when_no_policy_names_the_subject(
    cli_env: Settings, client: TestClient
) -> None:
    """Issue 18: a token for a subject with no rights worked, and every call said
    "not found"; the command now says so in one line, on stderr."""
    lonely = CliRunner().invoke(cli.app, ["token", "issue", "--subject", "lonely"])
    assert lonely.exit_code == 0
    assert lonely.stdout.strip().count(".") == 2  # stdout is still the token alone
    assert "warning: no policy names 'lonely'" in lonely.stderr
    assert 'embornal policy add "p, lonely, path:' in lonely.stderr
    added = CliRunner().invoke(
        cli.app, ["policy", "add", "p, granted, path:/agents/granted/*, write, allow"]
    )
    assert added.exit_code == 0, added.output
    granted = CliRunner().invoke(cli.app, ["token", "issue", "--subject", "granted"])
    assert granted.exit_code == 0 and granted.stderr == ""
