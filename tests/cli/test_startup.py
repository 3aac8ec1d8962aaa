"""The command starts fast: `--help` and `paths` import none of the heavy stack, and
bench/cli_startup.py (the table of start-up times) runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts processes (make test-fast leaves it out)

HEAVY = ("fastapi", "uvicorn", "onnxruntime", "casbin", "numpy", "sqlalchemy", "alembic", "httpx")
ROOT = Path(__file__).resolve().parents[2]


def imported_after(args: list[str], home: Path, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The `heavy` modules a fresh `embornal ARGS` has imported when it is done."""
    code = (
        "import sys\n"
        f"sys.argv = ['embornal', *{args!r}]\n"
        "from app.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import json\n"
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env["EMBORNAL_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["paths"], ["memory", "--help"]])
def test_light_commands_import_no_heavy_module(args: list[str], tmp_path: Path) -> None:
    assert imported_after(args, tmp_path) == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["memory", "--help"]])
def test_help_reads_no_settings(args: list[str], tmp_path: Path) -> None:
    """Help needs no config: pydantic and the settings (~0.1 s) wait for a command."""
    assert imported_after(args, tmp_path, ("pydantic", "yaml", "jwt")) == []


def test_a_search_with_its_model_in_place_fetches_and_serves_nothing(tmp_path: Path) -> None:
    """A search loads the model (onnxruntime) but neither the downloader (httpx, ~80 ms)
    nor the server's stack."""
    (tmp_path / "config.yaml").write_text("embedding: {model: minilm-l6, width: 384}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    env["EMBORNAL_HOME"] = str(tmp_path)
    # The memory made and the model copied from the installed packages, as `make run` leaves
    # them: the search after it is the one a user runs every day.
    subprocess.run(
        [sys.executable, "-m", "app.cli", "memory", "store", "/a", "the kettle is blue"],
        env=env,
        check=True,
        capture_output=True,
    )
    imported = imported_after(["memory", "search", "kettle"], tmp_path)
    assert "onnxruntime" in imported
    assert not {"fastapi", "uvicorn", "alembic", "httpx"} & set(imported), imported
    # Nor PyJWT and cryptography: a search signs and checks no token.
    assert imported_after(["memory", "search", "kettle"], tmp_path, ("jwt",)) == []


def test_the_startup_bench_runs_in_smoke_mode() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.cli_startup", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = {line.split("|")[1].strip() for line in lines if line.startswith("| ")}
    assert {"--help", "paths", "memory store (no model)"} <= rows
    assert any(line.startswith("load average ") for line in lines)
