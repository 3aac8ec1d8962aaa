"""The disk fills (issue 21, item 3): SQLite on a tmpfs mounted for the test.

Stores past the limit are a 507 problem and write nothing; the file passes SQLite's
integrity check and FTS5's; once space is freed the same app stores again. A backup
or an export to a full disk fails with one line and leaves no file under the final
name, nor a temporary one beside it.

Mounting needs root (the CI and these machines run tests as root).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.auth.tokens import issue_token
from app.main import create_app
from app.runtime import open_runtime
from tests.conftest import make_settings
from tests.ops.live import ROOT, cli_env, inspect_database, run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

CONTENT = 3900  # characters a fact, near the default limit: the disk fills in few stores


@pytest.fixture
def mount_tmpfs() -> Iterator[Any]:
    """`mount_tmpfs(size_bytes)` -> an empty tmpfs of that size; unmounted at the end."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        where = Path(tempfile.mkdtemp(prefix="embornal-full-"))
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True
        )
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def fill(directory: Path) -> Path:
    """Take every free block of `directory`'s filesystem with one file; return it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * 65536
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError:
                if len(chunk) == 512:
                    break
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    return filler


def listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_stores_on_a_full_disk_are_507_and_succeed_again_once_space_is_freed(
    mount_tmpfs: Any, migrated_template: Path, tmp_path: Path
) -> None:
    disk = mount_tmpfs(migrated_template.stat().st_size + 2 * 1024 * 1024)
    shutil.copy(migrated_template, disk / "memory.db")
    settings = make_settings(tmp_path, database={"path": str(disk / "memory.db")})
    runtime = open_runtime(settings)
    token = issue_token(settings, "default", dt.timedelta(hours=1))
    headers = {"Authorization": f"Bearer {token}"}
    app = create_app(settings, runtime=runtime)
    acknowledged: dict[int, str] = {}
    try:
        with TestClient(app, raise_server_exceptions=False) as client:

            def store(n: int) -> Any:
                content = f"fact {n} " + "x" * CONTENT
                body = {"path": "/disk", "content": content, "tags": {"n": str(n)}}
                response = client.post("/v1/facts", json=body, headers=headers)
                if response.status_code == 201:
                    acknowledged[response.json()["id"]] = content
                return response

            assert store(0).status_code == 201
            filler = fill(disk)
            refused = [store(n) for n in range(1, 4)]
            batch = [
                {"path": "/disk/batch", "content": f"batch {i} " + "y" * CONTENT} for i in range(40)
            ]
            refused.append(client.post("/v1/facts/batch", json={"facts": batch}, headers=headers))
            for response in refused:
                assert response.status_code == 507, response.text
                assert response.headers["content-type"].startswith("application/problem+json")
                body = response.json()
                assert body["type"] == "/problems/insufficient-storage"
                assert "disk is full" in body["detail"] and "nothing was written" in body["detail"]
                assert "Traceback" not in response.text and str(disk) not in response.text
            # Reads go on while the disk is full.
            listed = client.get("/v1/facts", params={"under": "/disk"}, headers=headers)
            assert listed.status_code == 200
            assert {f["id"] for f in listed.json()["facts"]} == set(acknowledged)

            # Nothing half-written: the file and its keyword and vector indexes agree.
            filler.unlink()
            state = inspect_database(disk / "memory.db")
            state.assert_consistent()
            assert {i: c for i, c in state.facts.items() if i in acknowledged} == acknowledged
            assert not any(
                c.startswith(("batch ", "fact 1 ", "fact 2 ", "fact 3 "))
                for c in state.facts.values()
            )

            # Space freed: the same app stores again, no restart.
            assert store(10).status_code == 201
            batch_again = client.post("/v1/facts/batch", json={"facts": batch[:5]}, headers=headers)
            assert batch_again.status_code == 201, batch_again.text
    finally:
        runtime.close()
    final = inspect_database(disk / "memory.db")
    final.assert_consistent()
    for fact_id, content in acknowledged.items():
        assert final.facts[fact_id] == content


def run_failing(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=cli_env(home, "none"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done


@pytest.mark.slow  # two CLI processes
def test_backup_and_export_to_a_full_disk_fail_with_one_line_and_leave_no_file(
    mount_tmpfs: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    run_cli(home, "none", "memory", "store", "/disk", "a fact " + "z" * CONTENT)
    disk = mount_tmpfs(256 * 1024)
    fill(disk)
    before = listing(disk)
    for command, name in (("backup", "memory-backup.db"), ("export", "memory.jsonl")):
        done = run_failing(home, "memory", command, str(disk / name))
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
        assert "Traceback" not in done.stderr
        assert "full" in lines[0] or "No space left" in lines[0], lines
        assert listing(disk) == before, listing(disk)  # no partial file, no temporary one
